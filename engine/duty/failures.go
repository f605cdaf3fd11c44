package duty

import (
	"slices"
	"time"

	"shoal/statemachine"
)

// Failure-aware placement: the driver remembers, per spec version of a
// service and per node, the service's tasks that recently ended rejected
// or failed on that node, and asks the scheduler to rank a node with
// FailureLimit of them within FailureWindow after every other node
// (sched.Request.Avoid). Without it a node that refuses every task of a
// service (a missing image, a broken volume, a bug in the agent) is the
// least loaded node right after each refusal, so the slot's replacement
// goes straight back to it, again and again.
//
// The log is the leader's soft state, like SwarmKit's per-node failure
// counts: it is not replicated, and a new leader starts without it. It
// learns again from what the groups still hold: every failed or rejected
// task the state retains (a slot's history) is counted by the new leader's
// first scan, at the time the entry that failed it was applied. A failure
// whose task the reaper deleted before that scan is forgotten, which at
// worst costs a few more tries on the bad node.

// DefaultFailureLimit and DefaultFailureWindow are SwarmKit's figures
// (a node with five failures of a service within five minutes is ranked
// last for it): five failures are far more than a node that was merely
// unlucky has (a task that crashes on its own fails wherever it runs, and
// the restart delay spaces its tries out), and five minutes outlast a
// burst of refusals at the default restart delay while letting a node
// that was fixed take the service's tasks again soon.
const (
	DefaultFailureLimit  = 5
	DefaultFailureWindow = 5 * time.Minute
)

// failedOnNode reports whether t counts as a failure of its service on
// its node: it ended rejected or failed there, and not after the
// orchestrator asked it to stop for another reason (moved, surplus,
// updated). A task whose node went down ends orphaned, not failed.
func failedOnNode(t *statemachine.Task) bool {
	st := t.Status.State
	if (st != statemachine.StateFailed && st != statemachine.StateRejected) || t.Node == 0 {
		return false
	}
	return !t.Desired.Stopping() || t.StopReason == statemachine.StopFailed
}

// failure is one failed task and when it failed (unix nanoseconds, the
// time of the entry that moved it).
type failure struct {
	task statemachine.TaskID
	at   int64
}

// failureLog counts recent failures per (service spec version, node). It
// keeps, per pair, only the newest limit distinct tasks: whether the pair
// has limit failures within the window depends on nothing older. The
// driver's run lock owns it.
type failureLog struct {
	limit  int
	window int64 // nanoseconds
	m      map[batchKey]map[uint32][]failure
}

func newFailureLog(limit int, window time.Duration) *failureLog {
	if limit <= 0 || window <= 0 {
		return nil
	}
	return &failureLog{limit: limit, window: int64(window), m: make(map[batchKey]map[uint32][]failure)}
}

// note records that t failed on its node if it did (failedOnNode) within
// the window before now. Noting a task again changes nothing, so a scan
// may note every failed task it meets. g is t's group. A nil log notes
// nothing.
func (l *failureLog) note(g int, t *statemachine.Task, now int64) {
	if l == nil || !failedOnNode(t) || t.Status.Timestamp <= now-l.window {
		return
	}
	k := batchKey{group: g, service: t.Service, version: t.SpecVersion}
	nodes := l.m[k]
	if nodes == nil {
		nodes = make(map[uint32][]failure)
		l.m[k] = nodes
	}
	node := uint32(t.Node)
	fs := nodes[node]
	oldest := -1
	for i, f := range fs {
		if f.task == t.ID {
			return
		}
		if oldest < 0 || f.at < fs[oldest].at {
			oldest = i
		}
	}
	f := failure{task: t.ID, at: t.Status.Timestamp}
	switch {
	case len(fs) < l.limit:
		nodes[node] = append(fs, f)
	case f.at > fs[oldest].at:
		fs[oldest] = f
	}
}

// avoid appends to dst, ascending, the nodes with at least limit failures
// of batch k within the window before now, and returns the extended slice.
func (l *failureLog) avoid(k batchKey, now int64, dst []uint32) []uint32 {
	if l == nil {
		return dst
	}
	start := len(dst)
	for node, fs := range l.m[k] {
		if l.recent(fs, now) >= l.limit {
			dst = append(dst, node)
		}
	}
	slices.Sort(dst[start:])
	return dst
}

func (l *failureLog) recent(fs []failure, now int64) int {
	n := 0
	for _, f := range fs {
		if f.at > now-l.window {
			n++
		}
	}
	return n
}

// sweep forgets the failures that left the window before now.
func (l *failureLog) sweep(now int64) {
	if l == nil {
		return
	}
	for k, nodes := range l.m {
		for node, fs := range nodes {
			fs = slices.DeleteFunc(fs, func(f failure) bool { return f.at <= now-l.window })
			if len(fs) == 0 {
				delete(nodes, node)
			} else {
				nodes[node] = fs
			}
		}
		if len(nodes) == 0 {
			delete(l.m, k)
		}
	}
}
