package engine

import (
	"context"

	"shoal/route"
	"shoal/statemachine"
)

// SubmitToGroup submits cmd to one group chosen by the caller, for the
// commands whose meaning is per group and so cannot be routed by Submit:
// CmdTick (the timer duty's clock entry), CmdNop, and CmdNodeSync (its Seq
// is the node's assignment sequence in one service group, whose addresses
// it releases; Submit sends it to the cluster group). Any other kind is
// rejected (CodeInvalid): objects have one owning group and nodes and
// networks must reach every group, so they go through Submit. It waits like
// Submit; a bad group number returns an error wrapping route.ErrNoGroup.
func (e *Engine) SubmitToGroup(ctx context.Context, group int, cmd statemachine.Command) (statemachine.Result, error) {
	if err := e.checkGroup(group); err != nil {
		return statemachine.Result{}, err
	}
	if !route.PerGroup(cmd.Kind) {
		rej := statemachine.Result{Code: statemachine.CodeInvalid,
			Msg: cmd.Kind.String() + " is routed by its object: use Submit"}
		return rej, rej.Err()
	}
	enc, rej := statemachine.AppendChecked(nil, &cmd)
	if rej.Code != statemachine.CodeOK {
		return rej, rej.Err()
	}
	w := &waiter{out: make([]route.Outcome, 1), done: make(chan struct{})}
	w.left.Store(1)
	if err := e.props[group].enqueue(ctx, []call{{enc: enc, w: w}}); err != nil {
		return statemachine.Result{}, err
	}
	select {
	case <-w.done:
		return w.out[0].Result, w.out[0].Err()
	case <-ctx.Done():
		return statemachine.Result{}, ctx.Err()
	}
}
