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

// joinWatch decides, from the counts read now and then, whether the wait
// for the agents is over: every agent joined (holds a session), or no
// progress for stall. Progress is a new most of agents holding a session
// or of nodes the cluster lists (every join creates one): while joins
// storm, sessions lapse and come back, so the first count alone dips and
// a wait on it gave up with joins still going on. It holds no clock: the
// times come with the counts.
type joinWatch struct {
	want        int
	stall       time.Duration
	best, nodes int       // the most seen of each count
	progressAt  time.Time // when either last grew (the start before)
}

type joinVerdict int

const (
	joinWaiting joinVerdict = iota
	joinAll                 // every agent joined
	joinStalled             // no progress for stall
)

func newJoinWatch(want int, stall time.Duration, start time.Time) *joinWatch {
	return &joinWatch{want: want, stall: stall, progressAt: start}
}

// observe takes the count of agents holding a session and of nodes the
// cluster lists (-1: not read this time) at now.
func (w *joinWatch) observe(now time.Time, joined, nodes int) joinVerdict {
	if joined > w.best {
		w.best, w.progressAt = joined, now
	}
	if nodes > w.nodes {
		w.nodes, w.progressAt = nodes, now
	}
	switch {
	case joined >= w.want:
		return joinAll
	case now.Sub(w.progressAt) >= w.stall:
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
	lastSaid, lastNodes := time.Now(), time.Time{}
	for ctx.Err() == nil {
		now := time.Now()
		joined, nodes := r.fleet.Connected(), -1
		if joined >= r.cfg.Agents || now.Sub(lastNodes) >= time.Second {
			// The cluster's node list: the progress of the joins, and
			// the judge once every agent holds a session (a session can
			// outlive its node's removal).
			lastNodes = now
			if st, err := r.cl.Access.Status(ctx, r.cl.APIs()[0]); err == nil {
				nodes = st.Nodes
			}
			if joined >= r.cfg.Agents && nodes < r.cfg.Agents {
				joined = r.cfg.Agents - 1
			}
		}
		switch w.observe(now, joined, nodes) {
		case joinAll:
			ph.Seconds = now.Sub(agentsStart).Seconds()
			ph.Note = fmt.Sprintf("all %d agents joined", r.cfg.Agents)
			r.logf("all %d agents joined %.1fs after they started", r.cfg.Agents, ph.Seconds)
			return ph
		case joinStalled:
			ph.Seconds = now.Sub(agentsStart).Seconds()
			ph.Note = fmt.Sprintf("at most %d of %d agents joined (%d nodes); no progress for %s", w.best, r.cfg.Agents, w.nodes, joinStall)
			r.logf("at most %d of %d agents joined %.1fs after they started (the cluster lists %d nodes), no progress for %s; going on",
				w.best, r.cfg.Agents, ph.Seconds, w.nodes, joinStall)
			return ph
		}
		if now.Sub(lastSaid) >= 10*time.Second {
			lastSaid = now
			r.logf("%d of %d agents hold a session, the cluster lists %d nodes", joined, r.cfg.Agents, w.nodes)
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
