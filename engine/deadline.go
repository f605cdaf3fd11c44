package engine

import (
	"context"
	"time"

	"shoal/route"
	"shoal/statemachine"
)

// Entries carry deadlines (see entry.go and statemachine.State.ApplyEntry):
// the proposer stamps each with the time after which it must not apply,
// and each group's leader keeps the group's replicated time moving so
// that the comparison means something in an idle group too.

// notAfter is the time after which an entry of calls must not apply: the
// earliest moment anyone stops waiting for it (the entry's own deadline,
// or a submitter's) plus the bound on clock error between replicas. No
// one is told "not confirmed in time" about a change that can still take
// effect past that.
func (p *proposer) notAfter(deadline time.Time, calls []call) int64 {
	na := deadline.UnixNano()
	for i := range calls {
		if c := calls[i].notAfter; c != 0 && c < na {
			na = c
		}
	}
	return na + int64(p.cfg.ClockBound)
}

// beat keeps the group's replicated time moving while this replica leads
// it: when the replica proposed nothing to the group for an election
// timeout, it proposes a CmdTick. An entry's deadline is compared with
// that time (statemachine.State.ApplyEntry), so in an idle group an entry
// forwarded long ago over a silent connection still meets a time past its
// deadline when it finally arrives.
func (p *proposer) beat() {
	every := p.cfg.TimeBeat
	if every < 0 {
		return
	}
	if every == 0 {
		every = time.Duration(p.cfg.ElectionRTT) * p.cfg.RTT
	}
	tick, _ := statemachine.AppendChecked(nil, &statemachine.Command{Kind: statemachine.CmdTick})
	for {
		select {
		case <-p.cfg.Clock.After(every):
		case <-p.stop:
			return
		}
		if leader, _ := p.lead.leaderTerm(p.group); leader != p.lead.self {
			continue
		}
		if p.cfg.Clock.Now().UnixNano()-p.proposed.last.Load() < int64(every) {
			continue
		}
		w := &waiter{out: make([]route.Outcome, 1), done: make(chan struct{})}
		w.left.Store(1)
		ctx, cancel := context.WithTimeout(context.Background(), every)
		_ = p.enqueue(ctx, []call{{enc: tick, w: w}}) // the next beat tries again
		cancel()
	}
}
