package control

import (
	"context"
	"errors"

	"shoal/route"
	"shoal/statemachine"
	"shoal/wire"
)

// Groups is what the sync fan-out needs of the replicated groups: their
// reads (Reader) and a per-group commit (the duty.Cluster seam has these
// methods; so does the engine).
type Groups interface {
	Reader
	// SubmitToGroup commits a per-group command (CmdNodeSync) to one group
	// and waits until this replica applied it.
	SubmitToGroup(ctx context.Context, group int, cmd statemachine.Command) (statemachine.Result, error)
}

// SyncPlan is where a node's sync goes: the handles no group of the cluster
// made (destroyed at once) and, per group to visit, the node's sequence
// there and the handles that group made.
type SyncPlan struct {
	Destroy []statemachine.TaskID
	Visits  []GroupSync // in ascending group order
}

// GroupSync is a sync's part in one group.
type GroupSync struct {
	Group int
	Seq   uint64 // the assignment sequence the node applied in this group; 0: none
	Held  []statemachine.TaskID
}

// PlanSync splits a node's sync report over a cluster of groups service
// groups: a handle whose group is not one of them goes to Destroy; a group
// is visited when the node reports a sequence there or holds a handle it
// made.
func PlanSync(req *wire.SyncRequest, groups int) SyncPlan {
	var p SyncPlan
	held := make([][]statemachine.TaskID, groups+1)
	for _, id := range req.Held {
		g := route.TaskGroup(id)
		if g < 1 || g > groups {
			p.Destroy = append(p.Destroy, id) // no group of this cluster made it
			continue
		}
		held[g] = append(held[g], id)
	}
	for g := 1; g <= groups; g++ {
		seq := uint64(0)
		if g < len(req.Seqs) {
			seq = req.Seqs[g]
		}
		if seq == 0 && len(held[g]) == 0 {
			continue
		}
		p.Visits = append(p.Visits, GroupSync{Group: g, Seq: seq, Held: held[g]})
	}
	return p
}

// Step is what the fan-out does next in one group.
type Step uint8

const (
	// TryLocal reads this replica's state: if it needs no commit for the
	// node's sequence (statemachine.State.SyncNeedsCommit), the answer
	// comes from that same read.
	TryLocal Step = iota
	// Commit commits CmdNodeSync, fenced by the node's sequence.
	Commit
	// AnswerLocal answers from this replica, which applied the commit.
	AnswerLocal
	// AnswerQuorum answers from a linearizable read.
	AnswerQuorum
	// Done: the group's answer (or the last step's error) is final.
	Done
)

var stepNames = [...]string{"try-local", "commit", "answer-local", "answer-quorum", "done"}

func (s Step) String() string {
	if int(s) < len(stepNames) {
		return stepNames[s]
	}
	return "step?"
}

// First is a group's first step: with a sequence, the local replica may
// answer alone; without one there is nothing to commit, and only a
// linearizable read may answer.
func (g GroupSync) First() Step {
	if g.Seq > 0 {
		return TryLocal
	}
	return AnswerQuorum
}

// Next decides a group's step after step ran: err is its error, and
// current (TryLocal only) whether the state it read needed no commit. The
// group's result is the error of the last step run: TryLocal's is never
// kept (the commit follows), nor is a commit's that only says the group
// refused the sync (ErrInvalid: a sequence past the newest; ErrNotFound:
// the node is unknown there), since a linearizable read then answers.
func Next(step Step, current bool, err error) Step {
	switch step {
	case TryLocal:
		if err == nil && current {
			return Done
		}
		return Commit
	case Commit:
		switch {
		case err == nil:
			// This replica applied the sync entry, so its state is at
			// least as new as what the agent had seen.
			return AnswerLocal
		case errors.Is(err, statemachine.ErrInvalid) || errors.Is(err, statemachine.ErrNotFound):
			// Nothing was applied: read past everything committed, or a
			// lagging replica would have the agent destroy tasks it does
			// not know yet.
			return AnswerQuorum
		}
	}
	return Done
}

// Sync runs a node's sync report (req.NodeID is the caller, checked by the
// caller) over the cluster's groups and returns the held handles the node
// must destroy: first those no group made, then each group's in group
// order, each group's ascending. On an error it returns the first group's
// error, in group order, and no answer.
func Sync(ctx context.Context, c Groups, req *wire.SyncRequest) ([]statemachine.TaskID, error) {
	return syncFanOut(ctx, c, req, false, seams{})
}

// syncFanOut is Sync, visiting the groups one after another in group
// order when sequential.
func syncFanOut(ctx context.Context, c Groups, req *wire.SyncRequest, sequential bool, bugs seams) ([]statemachine.TaskID, error) {
	plan := PlanSync(req, c.Groups())
	type result struct {
		destroy []statemachine.TaskID
		err     error
	}
	results := make([]result, len(plan.Visits))
	eachGroup(len(plan.Visits), sequential, func(i int) {
		results[i].destroy, results[i].err = syncGroup(ctx, c, req.NodeID, plan.Visits[i], bugs)
	})
	destroy := plan.Destroy
	for _, r := range results {
		if r.err != nil {
			return nil, r.err
		}
		destroy = append(destroy, r.destroy...)
	}
	return destroy, nil
}

// syncGroup carries out one group's steps.
func syncGroup(ctx context.Context, c Groups, node statemachine.NodeID, v GroupSync, bugs seams) ([]statemachine.TaskID, error) {
	var destroy []statemachine.TaskID
	answer := func(st *statemachine.State) { destroy = st.SyncAnswer(node, v.Held) }
	var err error
	for step := v.First(); step != Done; {
		current := false
		switch step {
		case TryLocal:
			// The answer comes from the same read as the check; Next
			// decides whether it stands.
			err = c.ReadLocal(v.Group, func(st *statemachine.State) {
				current = !st.SyncNeedsCommit(node, v.Seq)
				answer(st)
				current = current || bugs.answersSyncLagging()
			})
		case Commit:
			var res statemachine.Result
			res, err = c.SubmitToGroup(ctx, v.Group, statemachine.Command{Kind: statemachine.CmdNodeSync,
				Node: node, Seq: v.Seq, Tasks: v.Held})
			if res.Code == statemachine.CodeNodeNotReady {
				// The node is down or disconnected: it heartbeats first
				// (the agent's answer to node_not_ready), then syncs.
				err = &wire.Error{Code: wire.CodeNodeNotReady, Message: res.Msg}
			}
		case AnswerLocal:
			err = c.ReadLocal(v.Group, answer)
		case AnswerQuorum:
			err = c.Read(ctx, v.Group, answer)
		}
		step = Next(step, current, err)
	}
	return destroy, err
}

// eachGroup runs fn(0..n-1), concurrently (one goroutine each) unless
// sequential, and returns once every call returned.
func eachGroup(n int, sequential bool, fn func(i int)) {
	if sequential {
		for i := range n {
			fn(i)
		}
		return
	}
	done := make(chan struct{}, n)
	for i := range n {
		go func() {
			fn(i)
			done <- struct{}{}
		}()
	}
	for range n {
		<-done
	}
}
