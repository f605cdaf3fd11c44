package dialect

import (
	"fmt"
	"slices"
	"strings"
)

// The runners that speak the dialect.
const (
	Sim      = "sim"      // sim: the whole system on a simulated clock
	Scenario = "scenario" // engine/scenario: the state and the leader duties, one step at a time
	Monitor  = "monitor"  // engine/monitor: the node monitor's table alone
)

// Directive is one word of the dialect.
type Directive struct {
	Name    string
	Runners []string // the runners that speak it
	Usage   string   // its arguments, as scripts write them
	Meaning string   // what it is, whatever the runner
}

// Vocabulary is every directive, in the order docs/sim.md lists them. A
// word used by more than one runner means one thing in all of them; what
// each runner does for it is in that runner's doc.
var Vocabulary = []Directive{
	// Time and leadership.
	{"advance", []string{Sim, Scenario, Monitor}, "advance 30s",
		"time passes (sim: everything due runs; scenario: then one run of the timer duty; monitor: the clock only)"},
	{"leader-change", []string{Sim, Scenario, Monitor}, "leader-change [m2]",
		"a new leader: the duties start afresh there, the node monitor with its failover grace (sim: on replica m2)"},
	// The user.
	{"create-service", []string{Sim, Scenario}, "create-service web [replicas=N] [lost-after=1m] [reconcile=…] …",
		"the user creates a service"},
	{"update-service", []string{Sim, Scenario}, "update-service web [replicas=N] [image=v2] …",
		"the user updates a service"},
	{"remove-service", []string{Sim, Scenario}, "remove-service web", "the user removes a service"},
	{"rollback-service", []string{Sim, Scenario}, "rollback-service web", "the user rolls an update back"},
	{"network", []string{Scenario}, "network net subnet=10.0.0.0/29", "the user creates a network"},
	{"availability", []string{Sim, Scenario}, "availability n1 active|pause|drain", "the user sets a node's availability"},
	// Nodes and their agents.
	{"node", []string{Sim, Scenario}, "node n1 [role-played] [cpu=N] [mem=64M] [labels=k=v,…]",
		"a node joins (sim: role-played, its agent's messages are directives; scenario: its spec is upserted)"},
	{"node-status", []string{Scenario, Monitor}, "node-status n1 ready|disconnected|initializing|down [since=-30h]",
		"the node's replicated status is now this"},
	{"remove-node", []string{Scenario, Monitor}, "remove-node n1", "the node is removed"},
	{"agent-up", []string{Sim}, "agent-up n1", "a real agent starts on a new node"},
	{"restart-agent", []string{Sim}, "restart-agent n1 [wipe]", "a real agent restarts (wipe: without its store)"},
	{"session", []string{Sim}, "session n1", "a role-played agent opens a session"},
	{"heartbeat", []string{Sim, Scenario, Monitor}, "heartbeat n1", "the node's agent heartbeats"},
	{"report", []string{Sim, Scenario}, "report n1 web.1 running|failed|… [exit=N]", "the node's agent reports a task's state"},
	{"rereported", []string{Sim, Scenario, Monitor}, "rereported n1 [holds=web.1,…]",
		"the node's agent has re-reported everything it holds (sim: sends the marker)"},
	{"assignments", []string{Sim}, "assignments n1 [cursor=0,4|none]", "a role-played agent polls the assignment stream once"},
	{"sync", []string{Sim, Scenario}, "sync n1 [seq=…|seqs=…] [holds=web.1,…]",
		"the node's agent syncs: the sequence(s) it applied and the tasks it holds"},
	// Steps of the leader's duties, one at a time.
	{"schedule", []string{Scenario}, "schedule", "one run of the scheduler driver"},
	{"assign", []string{Scenario}, "assign web.1 n2", "the scheduler assigns a task, explicitly"},
	{"monitor-tick", []string{Scenario, Monitor}, "monitor-tick", "one tick of the node monitor"},
	{"orphan", []string{Scenario}, "orphan web.1", "the node monitor orphans a task, explicitly"},
	{"orphan-failed", []string{Monitor}, "orphan-failed n1", "a node's orphaning did not apply everywhere"},
	// Faults.
	{"partition", []string{Sim}, "partition n1", "the node is cut off the managers both ways"},
	{"heal", []string{Sim}, "heal [n1]", "the node (or everyone) is reconnected"},
	{"deliver", []string{Sim}, "deliver [drop=0.1] [delay=300ms] [dup=0.05]", "the network's faults from now on"},
	{"crash-manager", []string{Sim}, "crash-manager", "every manager replica restarts from a snapshot"},
	{"restart-manager", []string{Sim}, "restart-manager m2", "one replica restarts from a snapshot"},
	{"lag", []string{Sim}, "lag m2 2s", "a replica applies entries late"},
	{"route", []string{Sim}, "route m2|any", "where the agents' calls go"},
	// Running and reading.
	{"stabilize", []string{Sim}, "stabilize [max=10m]", "heal everything, run until settled, check quiescence"},
	{"dump", []string{Sim, Scenario}, "dump", "print the state"},
	{"spec", []string{Scenario}, "spec web.1", "the spec a task runs"},
	{"trace", []string{Sim}, "trace on [only=sync,status] | trace off", "print the calls the managers serve"},
	{"violations", []string{Sim}, "violations", "the checker's violations so far"},
	{"_breakpoint", []string{Sim}, "_breakpoint", "nothing (a place for a debugger)"},
	// Script headers.
	{"sim", []string{Sim}, "sim seed=1 [replicas=3] [groups=2] [lag=500ms] [sync=10s] [plant=…]", "the world (first directive)"},
	{"expect-violation", []string{Sim}, "expect-violation address-agents", "the invariant a planted bug's script must break"},
}

// Lookup returns the directive named name.
func Lookup(name string) (Directive, bool) {
	i := slices.IndexFunc(Vocabulary, func(d Directive) bool { return d.Name == name })
	if i < 0 {
		return Directive{}, false
	}
	return Vocabulary[i], true
}

// Speaks returns the names of the directives runner speaks.
func Speaks(runner string) []string {
	var out []string
	for _, d := range Vocabulary {
		if slices.Contains(d.Runners, runner) {
			out = append(out, d.Name)
		}
	}
	return out
}

// Check refuses a directive that runner does not speak, saying which
// runners do.
func Check(runner string, op Op) error {
	d, ok := Lookup(op.Cmd)
	if !ok {
		return fmt.Errorf("unknown directive %q", op.Cmd)
	}
	if !slices.Contains(d.Runners, runner) {
		return fmt.Errorf("%s is a directive of %s, not of %s", op.Cmd, strings.Join(d.Runners, " and "), runner)
	}
	return nil
}
