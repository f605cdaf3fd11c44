package duty

import (
	"context"

	"shoal/internal/clock"
	"shoal/route"
	"shoal/statemachine"
)

// Cluster is what the duties need of the replicated groups. Group 0 is the
// cluster group (nodes, networks); 1..Groups() are the service groups.
// *engine.Engine provides it raw (its SubmitMany only routes and waits);
// the duties get it under a Submitter, which adds the removal check and the
// outbox delivery (manager.Start wires them). Memory is the in-memory
// implementation and does both itself.
type Cluster interface {
	// Groups returns the number of service groups.
	Groups() int
	// Read runs fn over a group's state once everything committed before
	// the call is applied (linearizable). fn must not keep what it sees.
	Read(ctx context.Context, group int, fn func(*statemachine.State)) error
	// ReadLocal runs fn over the group's state as applied so far (stale).
	ReadLocal(group int, fn func(*statemachine.State)) error
	// SubmitMany routes every command to its group(s) (shoal/route)
	// and waits for all; one route.Outcome per command.
	SubmitMany(ctx context.Context, cmds []statemachine.Command) []route.Outcome
	// SubmitToGroup submits a per-group command (CmdTick, CmdNop,
	// CmdNodeSync) to one group and waits for it.
	SubmitToGroup(ctx context.Context, group int, cmd statemachine.Command) (statemachine.Result, error)
}

// defaults gives a duty the wall clock and a silent log where its config
// names none.
func defaults(c *clock.Clock, logf *func(string, ...any)) {
	if *c == nil {
		*c = clock.Real{}
	}
	if *logf == nil {
		*logf = func(string, ...any) {}
	}
}

func setDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}
