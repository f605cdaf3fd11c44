package api

import (
	"bytes"
	"fmt"
	"strings"
)

// metricHelp is the # HELP text of every family Shoal writes itself;
// api/README.md documents each with its labels (TestMetricsDocumented).
var metricHelp = map[string]string{
	"shoal_agent_sessions_total":          "Agent sessions this manager opened (an agent's first poll or a reconnect).",
	"shoal_agent_heartbeats_total":        "Agent heartbeats this manager accepted.",
	"shoal_agent_status_reports_total":    "Task state changes agents reported to this manager (one per task transition reported).",
	"shoal_agent_syncs_total":             "Agent syncs (the agent's full list of held tasks) this manager answered.",
	"shoal_assignment_frames_total":       "Assignment frames sent to agents, by kind (complete or incremental).",
	"shoal_joins_total":                   "Nodes and replicas that joined through this manager.",
	"shoal_joins_refused_total":           "Joins this manager refused (bad or expired token).",
	"shoal_cert_renewals_total":           "Certificates this manager renewed.",
	"shoal_tls_handshakes_total":          "TLS handshakes this manager's API completed, by whether they resumed a session.",
	"shoal_tls_handshakes_failed_total":   "TLS handshakes of this manager's API that failed, by reason: turn (waited for a turn past the timeout), no_hello (no client hello in time), slow (timed out after the hello), closed (the client closed the connection), refused (anything else).",
	"shoal_tls_connections_unused_total":  "Connections to this manager's API closed after their TLS handshake without a request: set-up work their client threw away.",
	"shoal_tls_handshake_wait_seconds":    "Time a TLS handshake waited for its turn (handshakes run a few at a time).",
	"shoal_tls_handshake_seconds":         "Time a TLS handshake took once it ran.",
	"shoal_agent_session_records":         "Agent sessions this manager keeps a record of.",
	"shoal_agent_polls_parked":            "Agent assignment polls parked on this manager, waiting for a change.",
	"shoal_log_lines_total":               "Lines of task output agents sent to log readers on this manager (shoal service logs).",
	"shoal_log_lines_dropped_total":       "Lines of task output this manager dropped because a reader's buffer was full (the reader was told how many).",
	"shoal_log_subscriptions":             "Log readers (shoal service logs) this manager serves now.",
	"shoal_log_buffered_bytes":            "Bytes of task output buffered for log readers on this manager now.",
	"go_gc_heap_live_bytes":               "Heap bytes the last garbage collection found live (runtime/metrics /gc/heap/live:bytes).",
	"shoal_http_requests_total":           "API requests this manager answered, by endpoint and HTTP status code.",
	"shoal_http_request_duration_seconds": "Time this manager took to answer an API request, by endpoint (long polls included).",
	"shoal_auth_denied_total":             "API requests refused by authorization, by reason.",
	"shoal_group_applied_index":           "Raft index this replica applied, by group (0 is the cluster group).",
	"shoal_group_leader":                  "Replica ID this replica believes leads the group (0: none known).",
	"shoal_group_proposals_total":         "Raft entries this replica proposed, by group (one entry carries a batch of commands).",
	"shoal_group_proposed_commands_total": "Commands this replica proposed, by group; divided by proposals, the mean batch size.",
	"shoal_raft_leader_changes_total":     "Leader changes this replica saw, by group.",
	"shoal_raft_term":                     "Raft term this replica is in, by group.",
	"shoal_tasks":                         "Tasks by observed state, in this replica's copy of the state.",
	"shoal_nodes":                         "Nodes by status, in this replica's copy of the state.",
	"shoal_services":                      "Services, in this replica's copy of the state.",
	"shoal_leading":                       "1 if this replica leads the cluster group, else 0.",

	// The heartbeat relay (relay.go).
	"shoal_agent_heartbeats_relayed_total": "Agent heartbeats other managers relayed that this manager accepted as the leader.",
}

// libraryHelp is the # HELP text of the Go runtime and process families
// github.com/VictoriaMetrics/metrics writes (WriteProcessMetrics), by prefix.
var libraryHelp = []struct{ prefix, help string }{
	{"go_memstats_", "Go runtime memory statistic (runtime.MemStats), as github.com/VictoriaMetrics/metrics writes it."},
	{"go_", "Go runtime statistic (runtime/metrics), as github.com/VictoriaMetrics/metrics writes it."},
	{"process_", "Statistic of the manager's process (/proc), as github.com/VictoriaMetrics/metrics writes it."},
}

// helpOf is the # HELP text of a family.
func helpOf(family string) string {
	if h, ok := metricHelp[family]; ok {
		return h
	}
	for _, l := range libraryHelp {
		if strings.HasPrefix(family, l.prefix) {
			return l.help
		}
	}
	return "See api/README.md."
}

// writeHead writes the # HELP and # TYPE lines of a family Shoal writes by
// hand (the state gauges).
func writeHead(b *bytes.Buffer, family, typ string) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", family, helpOf(family), family, typ)
}

// fillHelp gives the library's empty "# HELP family" lines their text.
func fillHelp(in []byte) []byte {
	out := make([]byte, 0, len(in)+len(in)/4)
	for len(in) > 0 {
		line := in
		if i := bytes.IndexByte(in, '\n'); i >= 0 {
			line, in = in[:i+1], in[i+1:]
		} else {
			in = nil
		}
		name, ok := bytes.CutPrefix(bytes.TrimSuffix(line, []byte("\n")), []byte("# HELP "))
		if ok && bytes.IndexByte(name, ' ') < 0 {
			out = append(out, "# HELP "...)
			out = append(out, name...)
			out = append(out, ' ')
			out = append(out, helpOf(string(name))...)
			out = append(out, '\n')
			continue
		}
		out = append(out, line...)
	}
	return out
}
