package sim

import (
	"strconv"
	"time"

	"shoal/api/client"
	"shoal/loadgen/check"
	"shoal/statemachine"
)

// Quiescence: "stabilize" heals every fault and runs the clock until the
// cluster reached what the user wants (settled), then feeds the checker's
// quiescence checks (one-per-slot, as-desired) and the replicas' state
// hashes (replicas-agree).

// settled reports whether the cluster reached what the user wants: every
// agent up, live, re-reported and owing nothing, its node ready; every
// wanted service running its count at its current spec, every task it
// wants running running on a ready node; no service the user removed
// left; the event stream caught up. (Counts alone are not enough: a
// disconnected node's original still shows running beside its
// replacement while another slot's task is still starting.)
func (w *World) settled() bool {
	nodes := map[statemachine.NodeID]statemachine.NodeStatus{}
	w.gs.read(w.leader, 0, func(st *statemachine.State) {
		for _, id := range st.NodeIDs() {
			nodes[id] = st.Node(id).Status
		}
	})
	for _, a := range w.agents {
		if a.up && (!a.live || a.reported != a.epoch || a.m.Unacked() > 0 || !a.m.Current() ||
			nodes[a.node] != statemachine.NodeReady) {
			return false
		}
	}
	ok := true
	for g := 1; g <= w.cfg.Groups && ok; g++ {
		w.gs.read(w.leader, g, func(st *statemachine.State) {
			for _, id := range st.ServiceIDs() {
				svc := st.Service(id)
				want, wanted := w.want[svc.Spec.Name]
				c := st.CountServiceTasks(id)
				if !wanted || svc.Remove || c.Running != want || c.RunningAny != want ||
					svc.Update.State == statemachine.Updating || svc.Update.State == statemachine.RollbackStarted {
					ok = false
					return
				}
				_, slots := st.SlotTasks(id)
				for _, ts := range slots {
					for _, t := range ts {
						if t.Desired == statemachine.DesiredRunning &&
							(t.Status.State != statemachine.StateRunning || nodes[t.Node] != statemachine.NodeReady) {
							ok = false
							return
						}
					}
				}
			}
		})
	}
	if !ok {
		return false
	}
	// The checker's count is what a user sees: the event stream caught up
	// with the log first, so a task a lagging stream has not shown yet
	// (or one still shown running on a down node) is not mistaken for
	// settled.
	for g := range w.gs.g {
		w.gs.catchUp(w.stream, g, w.gs.end(g), true)
	}
	w.feed()
	running := w.chk.Running()
	for name, n := range w.want {
		if running[name] != n {
			return false
		}
	}
	return len(running) <= len(w.want)
}

// stabilize heals the network, stops the lags and runs until the cluster
// settled (at most max), then runs the quiescence checks. It reports
// whether it settled.
func (w *World) stabilize(max time.Duration) bool {
	clear(w.net.cut)
	w.net.Drop, w.net.Dup = 0, 0
	for _, a := range w.agents {
		if !a.up {
			a.start(false)
		}
	}
	for _, gr := range w.gs.g {
		clear(gr.lag)
	}
	settled := false
	for waited := time.Duration(0); waited < max; waited += time.Second {
		w.run(time.Second)
		if w.settled() {
			settled = true
			break
		}
	}
	w.chk.Quiesced(w.want, w.clk.Now())
	w.compareReplicas()
	return settled
}

// compareReplicas feeds the checker's replicas-agree: every replica's
// state hash per group, as GET /v1/status?hash=true renders them.
func (w *World) compareReplicas() {
	var sts []client.Status
	for r := range w.cfg.Replicas {
		st := client.Status{Replica: uint64(r + 1)}
		for g := range w.gs.g {
			w.gs.catchUp(r, g, w.gs.end(g), r == w.stream)
			w.gs.read(r, g, func(s *statemachine.State) {
				st.Groups = append(st.Groups, client.GroupStatus{Group: g, AppliedIndex: s.LastIndex(),
					Hash: strconv.FormatUint(s.Hash(), 16)})
			})
		}
		sts = append(sts, st)
	}
	w.feed()
	for _, c := range check.CompareReplicas(sts) {
		if c.Problem != "" {
			w.chk.ReplicasDisagree(c.Problem, w.clk.Now())
			continue
		}
		w.chk.ReplicasAgree()
	}
}
