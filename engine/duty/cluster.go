package duty

import (
	"context"
	"time"

	"shoal/internal/clock"
	"shoal/statemachine"
)

// Cluster is what the duties need of the replicated groups. Group 0 is the
// cluster group (nodes, networks); 1..Groups() are the service groups.
// *engine.Engine provides it (through engine's duty constructors); Memory
// is the in-memory implementation.
type Cluster interface {
	// Groups returns the number of service groups.
	Groups() int
	// Read runs fn over a group's state once everything committed before
	// the call is applied (linearizable). fn must not keep what it sees.
	Read(ctx context.Context, group int, fn func(*statemachine.State)) error
	// ReadLocal runs fn over the group's state as applied so far (stale).
	ReadLocal(group int, fn func(*statemachine.State)) error
	// SubmitMany routes every command to its group(s) (shoal/engine/route)
	// and waits for all; one Outcome per command.
	SubmitMany(ctx context.Context, cmds []statemachine.Command) []Outcome
	// SubmitToGroup submits a per-group command (CmdTick, CmdNop,
	// CmdNodeSync) to one group and waits for it.
	SubmitToGroup(ctx context.Context, group int, cmd statemachine.Command) (statemachine.Result, error)
}

// Outcome is what became of one submitted command.
type Outcome struct {
	// Result is the state machine's verdict; zero when Failed is set.
	Result statemachine.Result
	// Failed is set when the command was not applied (timeout, not
	// proposed, closed, context ended).
	Failed error
}

// Err returns Failed, else the result's rejection, else nil.
func (o Outcome) Err() error {
	if o.Failed != nil {
		return o.Failed
	}
	return o.Result.Err()
}

// Clock is the duties' time: Now stamps decisions, After waits between
// runs. It is the part of shoal/internal/clock.Clock the duties use, so
// clock.Real, clock.Fake (tests advance it) and the engine's Clock all
// satisfy it.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

var _ Clock = clock.Clock(nil)

// defaults gives a duty the wall clock and a silent log where its config
// names none.
func defaults(c *Clock, logf *func(string, ...any)) {
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
