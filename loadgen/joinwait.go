package loadgen

import (
	"context"
	"fmt"
	"time"

	"shoal/loadgen/report"
)

// joinStall is how long the loadgen waits for its agents to join without
// one more of them joining before it starts the ramp anyway. A fixed wait
// (a minute) used to start the ramp of a 10,000-agent run with agents
// still joining, so its figures mixed the join storm into the ramp and
// runs did not compare.
const joinStall = 30 * time.Second

// joinWatch decides, from the count of joined agents read now and then,
// whether the wait for the agents is over: every agent joined, or none
// more joined for stall (the most joined so far is what counts, so a
// count that dips and comes back is no progress). It holds no clock: the
// times come with the counts.
type joinWatch struct {
	want   int
	stall  time.Duration
	best   int
	bestAt time.Time // when best was first seen (the start before any)
}

type joinVerdict int

const (
	joinWaiting joinVerdict = iota
	joinAll                 // every agent joined
	joinStalled             // none more joined for stall
)

func newJoinWatch(want int, stall time.Duration, start time.Time) *joinWatch {
	return &joinWatch{want: want, stall: stall, bestAt: start}
}

// observe takes the count of joined agents at now.
func (w *joinWatch) observe(now time.Time, joined int) joinVerdict {
	if joined > w.best {
		w.best, w.bestAt = joined, now
	}
	switch {
	case joined >= w.want:
		return joinAll
	case now.Sub(w.bestAt) >= w.stall:
		return joinStalled
	}
	return joinWaiting
}

// waitAgents waits until the cluster lists every agent as a node and every
// agent has a session, as long as agents keep joining (none more for
// joinStall: it goes on, saying so). It says how long the joins took and
// returns the report's setup phase (from the agents' start).
func (r *run) waitAgents(ctx context.Context, agentsStart time.Time) report.Phase {
	ph := report.Phase{Name: "setup", StartSeconds: agentsStart.Sub(r.start).Seconds()}
	w := newJoinWatch(r.cfg.Agents, joinStall, agentsStart)
	lastSaid := time.Now()
	for ctx.Err() == nil {
		now := time.Now()
		joined := r.fleet.Connected()
		if joined >= r.cfg.Agents {
			// Every agent holds a session; the cluster's node list is the
			// judge (a session can outlive its node's removal).
			if st, err := r.cl.Access.Status(ctx, r.cl.APIs()[0]); err != nil || st.Nodes < r.cfg.Agents {
				joined = r.cfg.Agents - 1
			}
		}
		switch w.observe(now, joined) {
		case joinAll:
			ph.Seconds = now.Sub(agentsStart).Seconds()
			ph.Note = fmt.Sprintf("all %d agents joined", r.cfg.Agents)
			r.logf("all %d agents joined %.1fs after they started", r.cfg.Agents, ph.Seconds)
			return ph
		case joinStalled:
			ph.Seconds = now.Sub(agentsStart).Seconds()
			ph.Note = fmt.Sprintf("%d of %d agents joined; none more for %s", w.best, r.cfg.Agents, joinStall)
			r.logf("only %d of %d agents joined %.1fs after they started, none more for %s; going on",
				w.best, r.cfg.Agents, ph.Seconds, joinStall)
			return ph
		}
		if now.Sub(lastSaid) >= 10*time.Second {
			lastSaid = now
			r.logf("%d of %d agents joined", joined, r.cfg.Agents)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	ph.Seconds = time.Since(agentsStart).Seconds()
	ph.Note = "the run ended while agents joined"
	return ph
}
