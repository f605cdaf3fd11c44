package sim

import (
	"errors"
	"time"

	"shoal/wire"
)

// errConnection is what a call whose request or answer the network lost
// gets once it times out, and a parked poll whose manager crashed: a
// transport error, which an agent retries.
var errConnection = errors.New("sim: no answer (connection lost)")

// network carries the agents' calls to the managers and the answers
// back. Each message is delivered after a delay up to Delay (so messages
// overtake each other), dropped with probability Drop, and a request is
// delivered a second time with probability Dup (its second answer goes
// nowhere). A partitioned agent's messages are lost both ways.
type network struct {
	w     *World
	Drop  float64
	Delay time.Duration
	Dup   float64
	cut   map[string]bool // partitioned agents
	// Pin makes every call go to this manager replica (-1: the seed
	// chooses per call).
	Pin int
}

func (n *network) delay() time.Duration {
	if n.Delay <= 0 {
		return time.Millisecond
	}
	return time.Millisecond + time.Duration(n.w.rng.Int64N(int64(n.Delay)))
}

func (n *network) lost(name string) bool {
	return n.cut[name] || (n.Drop > 0 && n.w.rng.Float64() < n.Drop)
}

// replicaFor chooses the manager replica that serves req: heartbeats and
// re-reports go to the cluster group's leader, the rest where the seed (or
// Pin) says.
func (n *network) replicaFor(req wire.Message) int {
	switch q := req.(type) {
	case *wire.Heartbeat:
		return n.w.leader
	case *wire.StatusBatch:
		if q.ReReport {
			return n.w.leader
		}
	}
	if n.Pin >= 0 {
		return n.Pin
	}
	return n.w.rng.IntN(n.w.cfg.Replicas)
}

// call sends req from the agent named name; done gets the first answer, or
// errConnection after timeout.
func (n *network) call(name string, req wire.Message, timeout time.Duration, done func(wire.Message, error)) {
	answered := false
	finish := func(resp wire.Message, err error) {
		if answered {
			return
		}
		answered = true
		done(resp, err)
	}
	timer := n.w.clk.AfterFunc(timeout, func() { finish(nil, errConnection) })
	deliver := func(first bool) {
		if n.lost(name) {
			return
		}
		n.w.clk.AfterFunc(n.delay(), func() {
			if n.cut[name] {
				return
			}
			r := n.replicaFor(req)
			applied := ""
			if n.w.trace != nil {
				applied = n.w.applied(r)
			}
			n.w.manager.serve(r, req, func(resp wire.Message, err error) {
				n.w.traceCall(name, r, applied, req, resp, err, !first)
				if !first || n.lost(name) {
					return
				}
				n.w.clk.AfterFunc(n.delay(), func() {
					if n.cut[name] {
						return
					}
					timer.Stop()
					finish(resp, err)
				})
			})
		})
	}
	deliver(true)
	if n.Dup > 0 && n.w.rng.Float64() < n.Dup {
		deliver(false)
	}
}
