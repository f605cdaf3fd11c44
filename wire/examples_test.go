package wire

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"shoal/statemachine"
)

// examples has one realistic message of every type. README.md shows each
// as JSON (TestREADMEShowsEveryMessage keeps them in step) and the fuzz
// targets start from their frames.
var examples = []Message{
	&Error{Code: CodeNotLeader, Message: "this manager is not the leader; send heartbeats to 10.0.0.2:7946",
		Leader: "10.0.0.2:7946"},
	&SessionRequest{NodeID: 0, Node: NodeDescription{Hostname: "worker-17", Labels: map[string]string{"zone": "b"},
		CPU: 4000, Memory: 8 << 30, AgentVersion: "0.3.0"}},
	&Session{NodeID: 17, SessionID: 9061852, HeartbeatPeriod: 5e9, SyncInterval: 60e9,
		Managers: []string{"10.0.0.1:7946", "10.0.0.2:7946", "10.0.0.3:7946"}, Groups: 4},
	&Heartbeat{NodeID: 17, SessionID: 9061852},
	&HeartbeatAck{Period: 5e9, Status: 0},
	&AssignmentsRequest{NodeID: 17, SessionID: 9061852, Cursor: Cursor{1042, 88, 0, 7, 301}, Wait: 30e9},
	&Assignments{Kind: FrameIncremental, Last: true, AppliesTo: Cursor{1042, 88, 0, 7, 301},
		ResultsIn: Cursor{1042, 95, 0, 7, 301}, Seqs: []uint64{0, 12},
		Specs: []Spec{{Service: "web", Version: 3, Command: []string{"/bin/web", "--port=8080"},
			Env: []string{"MODE=prod"}, Dir: "/srv", StopGrace: 10e9}},
		Tasks: []Assignment{{Task: 4411, Service: "web", Slot: 2, SpecVersion: 3, Desired: 1, State: 2,
			Addresses: []Address{{Network: "front", Addr: "10.1.0.12/16"}}}},
		Removed: []statemachine.TaskID{4102},
		Logs:    []LogSubscription{{ID: 77, Publish: "10.0.0.3:7946", Tasks: []statemachine.TaskID{4411}, Follow: true, Tail: 10}}},
	&StatusBatch{NodeID: 17, SessionID: 9061852, Reports: []StatusReport{
		{Task: 4411, State: 7, At: 1767225600000000000},
		{Task: 4102, State: 10, ExitCode: 137, Message: "killed", At: 1767225601500000000}}},
	&StatusAck{Results: []ReportResult{ReportAccepted, ReportRejected},
		Messages: []string{"", "task 4102 is not assigned to node 17"}},
	&SyncRequest{NodeID: 17, SessionID: 9061852, Seqs: []uint64{0, 12}, Held: []statemachine.TaskID{4411, 3990}},
	&SyncAnswer{Destroy: []statemachine.TaskID{3990}},
	&LogBatch{NodeID: 17, Sub: 77, Lines: []LogLine{{Task: 4411, Stream: LogStdout, At: 1767225600000000000, Data: "listening on :8080"}}},
	&LogAck{Stop: false},
}

// TestREADMEShowsEveryMessage checks that README.md has a JSON example under
// a "### <type>" heading for every message type, that each decodes, and
// that it is exactly what EncodeJSON writes for the example message.
func TestREADMEShowsEveryMessage(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	for _, m := range regexp.MustCompile("(?s)### ([a-z_]+)\n[^#]*?```json\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		blocks[m[1]] = m[2]
	}
	for _, ex := range examples {
		name := ex.Type().String()
		block, ok := blocks[name]
		want, err := EncodeJSON(ex)
		if err != nil {
			t.Fatal(err)
		}
		var indented bytes.Buffer
		json.Indent(&indented, want, "", "  ")
		if !ok {
			t.Errorf("README.md has no example of %s; add:\n### %s\n\n```json\n%s\n```", name, name, indented.String())
			continue
		}
		if _, err := DecodeJSON(ex.Type(), []byte(block)); err != nil {
			t.Errorf("README.md example of %s does not decode: %v", name, err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(block)); err != nil || compact.String() != string(want) {
			t.Errorf("README.md example of %s differs from the encoded example; want:\n%s", name, indented.String())
		}
	}
	if len(examples) != int(numMsgTypes)-1 || strings.Count(string(readme), "```json") < len(examples) {
		t.Errorf("%d examples for %d message types", len(examples), numMsgTypes-1)
	}
}
