package duty

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"shoal/internal/clock"
	"shoal/statemachine"
)

// The outbox duty is the cluster group leader's re-drive (see
// statemachine/outbox.go). Each run:
//
//  1. delivers every cluster-group outbox entry a service group has not
//     applied yet (CmdDeliver, in order; a duplicate changes nothing);
//  2. asks each service group holding an empty block nothing waits for to
//     release it (CmdReleaseBlocks);
//  3. sends the cluster group, in one batch, every group's released blocks
//     (CmdReturnBlocks), then its unmet address needs (CmdRequestBlocks),
//     then how far it applied the outbox (CmdOutboxAck, so entries every
//     group applied are dropped);
//  4. goes back to 1 while step 3 appended to the outbox (grants to deliver).
//
// It runs every Interval and when its Signal fires (an outbox entry was
// appended, a task waits for a block). Whatever a crash or a leader change
// cut short — a submitter's delivery, a grant on its way — the next run of
// whichever replica leads then finds in the replicated states and does
// again, so the groups agree again within one Interval. Submitters of node
// and network commands call Deliver themselves so their change reaches the
// service groups before they return; the duty is the safety net.

// OutboxConfig tunes the outbox duty. Zero values take the defaults named
// on each field.
type OutboxConfig struct {
	// Interval is the time between runs, on Clock: the longest groups
	// disagree after a lost delivery. Default 1s.
	Interval time.Duration
	// MinGap is the least time between the starts of two runs triggered by
	// Signal. Default 5ms.
	MinGap time.Duration
	// Clock times Interval and MinGap. Default: clock.Real (manager.Start
	// passes the engine's clock).
	Clock clock.Clock
	// Signal, if set, wakes the duty; build it with NewOutboxSignal and wire
	// its OnApply into the engine's Config.OnApply. Default: none.
	Signal *Signal
	// Logf receives run failures. Default: discard.
	Logf func(format string, args ...any)
}

func (c OutboxConfig) withDefaults() OutboxConfig {
	setDefault(&c.Interval, time.Second)
	setDefault(&c.MinGap, 5*time.Millisecond)
	defaults(&c.Clock, &c.Logf)
	return c
}

// NewOutboxSignal returns a signal that fires on EffOutbox and
// EffBlocksWanted, for OutboxConfig.Signal.
func NewOutboxSignal() *Signal {
	return &Signal{c: make(chan struct{}, 1), kinds: []statemachine.EffectKind{statemachine.EffOutbox, statemachine.EffBlocksWanted}}
}

// OutboxDuty is the outbox duty; its methods are safe for concurrent use
// and runs never overlap.
type OutboxDuty struct {
	c   Cluster
	cfg OutboxConfig
	run sync.Mutex
}

// NewOutboxDuty returns the outbox duty over c.
func NewOutboxDuty(c Cluster, cfg OutboxConfig) *OutboxDuty {
	return &OutboxDuty{c: c, cfg: cfg.withDefaults()}
}

// Run re-drives until ctx ends: at once, then every Interval and whenever
// Signal fires (at most once per MinGap).
func (d *OutboxDuty) Run(ctx context.Context) {
	wakeLoop(ctx, d.cfg.Clock, d.cfg.Interval, fixedGap(d.cfg.MinGap), d.cfg.Signal, func() {
		if err := d.RunOnce(ctx); err != nil && ctx.Err() == nil {
			d.cfg.Logf("engine: outbox: %v", err)
		}
	})
}

// RunOnce makes one re-drive run (steps 1–4 above) and returns the first
// failure; what failed is tried again by the next run.
func (d *OutboxDuty) RunOnce(ctx context.Context) error {
	d.run.Lock()
	defer d.run.Unlock()
	// A group that cannot be reached does not hold up the others: every
	// step runs, and the failures are reported together.
	var errs []error
	for range 4 {
		errs = append(errs, Deliver(ctx, d.c), d.release(ctx))
		more, err := d.forward(ctx)
		if errs = append(errs, err); !more {
			return errors.Join(errs...)
		}
	}
	return errors.Join(append(errs, Deliver(ctx, d.c))...)
}

// groupView is what a run reads of one service group.
type groupView struct {
	applied    uint64
	returnable bool
	returning  map[statemachine.NetworkID][]uint32
	wants      []statemachine.BlockWant
}

func readGroup(c Cluster, g int, full bool) (groupView, error) {
	var v groupView
	err := c.ReadLocal(g, func(s *statemachine.State) {
		v.applied, _ = s.OutboxApplied()
		if full {
			v.returnable = s.Returnable()
			v.returning = s.Returning()
			v.wants = s.BlockWants()
		}
	})
	return v, err
}

// Deliver sends every service group the cluster group's outbox entries it
// has not applied yet (as this replica has applied both), in one
// submission, and waits for them. Submitters of node and network commands
// call it so their change reaches every group before they return.
func Deliver(ctx context.Context, c Cluster) error {
	n := c.Groups()
	applied := make([]uint64, n+1)
	low := ^uint64(0)
	for g := 1; g <= n; g++ {
		v, err := readGroup(c, g, false)
		if err != nil {
			return fmt.Errorf("read group %d: %w", g, err)
		}
		applied[g] = v.applied
		low = min(low, v.applied)
	}
	var entries []statemachine.OutboxEntry
	if err := c.ReadLocal(0, func(s *statemachine.State) { entries = s.Outbox(low) }); err != nil {
		return fmt.Errorf("read the cluster group: %w", err)
	}
	var cmds []statemachine.Command
	for g := 1; g <= n; g++ {
		for i := range entries {
			if entries[i].Seq > applied[g] {
				cmds = append(cmds, statemachine.Command{Kind: statemachine.CmdDeliver, Group: uint16(g), Entry: &entries[i]})
			}
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	var errs []error
	for i, o := range c.SubmitMany(ctx, cmds) {
		if o.Failed != nil {
			errs = append(errs, fmt.Errorf("deliver outbox entry %d to group %d: %w", cmds[i].Entry.Seq, cmds[i].Group, o.Failed))
			break // later entries for the group wait for this one
		}
	}
	return errors.Join(errs...)
}

// release asks every service group with a returnable block to release it.
func (d *OutboxDuty) release(ctx context.Context) error {
	for g := 1; g <= d.c.Groups(); g++ {
		v, err := readGroup(d.c, g, true)
		if err != nil {
			return fmt.Errorf("read group %d: %w", g, err)
		}
		if !v.returnable {
			continue
		}
		if _, err := d.c.SubmitToGroup(ctx, g, statemachine.Command{Kind: statemachine.CmdReleaseBlocks}); err != nil {
			return fmt.Errorf("release blocks in group %d: %w", g, err)
		}
	}
	return nil
}

// forward sends the cluster group what the service groups returned, want
// and applied; it reports whether the outbox grew meanwhile.
func (d *OutboxDuty) forward(ctx context.Context) (bool, error) {
	n := d.c.Groups()
	var acked []uint64
	var next uint64
	if err := d.c.ReadLocal(0, func(s *statemachine.State) {
		next = s.OutboxNext()
		for g := 0; g <= n; g++ {
			acked = append(acked, s.OutboxAcked(g))
		}
	}); err != nil {
		return false, fmt.Errorf("read the cluster group: %w", err)
	}
	var returns, requests, acks []statemachine.Command
	for g := 1; g <= n; g++ {
		v, err := readGroup(d.c, g, true)
		if err != nil {
			return false, fmt.Errorf("read group %d: %w", g, err)
		}
		for _, id := range sortedNetworks(v.returning) {
			returns = append(returns, statemachine.Command{Kind: statemachine.CmdReturnBlocks, Group: uint16(g),
				Network: id, Blocks: v.returning[id], Seq: v.applied})
		}
		for _, w := range v.wants {
			requests = append(requests, statemachine.Command{Kind: statemachine.CmdRequestBlocks, Group: uint16(g),
				Network: w.Network, Count: w.Count, Seq: v.applied})
		}
		if v.applied > acked[g] {
			acks = append(acks, statemachine.Command{Kind: statemachine.CmdOutboxAck, Group: uint16(g), Seq: v.applied})
		}
	}
	cmds := append(append(returns, requests...), acks...)
	if len(cmds) == 0 {
		return false, nil
	}
	for i, o := range d.c.SubmitMany(ctx, cmds) {
		if o.Failed != nil {
			return false, fmt.Errorf("%s for group %d: %w", cmds[i].Kind, cmds[i].Group, o.Failed)
		}
	}
	var after uint64
	if err := d.c.ReadLocal(0, func(s *statemachine.State) { after = s.OutboxNext() }); err != nil {
		return false, fmt.Errorf("read the cluster group: %w", err)
	}
	return after != next, nil
}

func sortedNetworks(m map[statemachine.NetworkID][]uint32) []statemachine.NetworkID {
	ids := make([]statemachine.NetworkID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Precheck asks every service group whether it can follow a removal the
// cluster group is about to decide (a node with live tasks, a network a
// service uses), so the user hears why not before the cluster group
// commits to it. Other commands pass (a zero Result).
func Precheck(ctx context.Context, c Cluster, cmd *statemachine.Command) statemachine.Result {
	if cmd.Kind != statemachine.CmdRemoveNode && cmd.Kind != statemachine.CmdRemoveNetwork {
		return statemachine.Result{}
	}
	for g := 1; g <= c.Groups(); g++ {
		var r statemachine.Result
		if err := c.Read(ctx, g, func(s *statemachine.State) { r = s.CheckRemoval(cmd) }); err != nil {
			return statemachine.Result{Code: statemachine.CodeNotAllowed,
				Msg: fmt.Sprintf("cannot check group %d before removing: %v; retry", g, err)}
		}
		if r.Code != statemachine.CodeOK {
			return r
		}
	}
	return statemachine.Result{}
}
