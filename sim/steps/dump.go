package steps

import (
	"fmt"
	"net/netip"
	"strings"

	sm "shoal/statemachine"
)

// dump prints the whole state, deterministically:
//
//	service web v2 replicated replicas=3 image=v1 restart=any networks=net vips=10.0.0.1 [removing]
//	  web.1:
//	    #1 t1 n1 v1 desired=shutdown state=failed exit=1 net=10.0.0.2:quarantined
//	node n1 ready active seq=3 tasks=t1,t4
//	pool net 10.0.0.0/29 free=1 held=3 quarantined=1
func (r *runner) dump() string {
	var b strings.Builder
	fmt.Fprintf(&b, "now=%s\n", r.elapsed(r.now))
	for _, sid := range r.s.ServiceIDs() {
		svc := r.s.Service(sid)
		sp := svc.Spec
		fmt.Fprintf(&b, "service %s v%d %s", sp.Name, svc.SpecVersion, sp.Mode)
		if sp.Mode == sm.ModeReplicated {
			fmt.Fprintf(&b, " replicas=%d", sp.Replicas)
		}
		if sp.Image != "" {
			fmt.Fprintf(&b, " image=%s", sp.Image)
		}
		fmt.Fprintf(&b, " restart=%s", sp.Restart.Condition)
		if len(sp.Constraints) > 0 {
			fmt.Fprintf(&b, " constraints=%s", strings.Join(sp.Constraints, ","))
		}
		if pl := sp.Placement; len(pl.Preferences) > 0 {
			fmt.Fprintf(&b, " preferences=%s", strings.Join(pl.Preferences, ","))
		}
		if pl := sp.Placement; pl.MaxPerNode > 0 {
			fmt.Fprintf(&b, " max-per-node=%d", pl.MaxPerNode)
		}
		if pl := sp.Placement; pl.Strategy != sm.StrategySpread {
			fmt.Fprintf(&b, " strategy=%s", pl.Strategy)
		}
		if len(sp.Networks) > 0 {
			fmt.Fprintf(&b, " networks=%s vips=%s", strings.Join(sp.Networks, ","), r.vips(svc))
		}
		if svc.Remove {
			b.WriteString(" removing")
		}
		b.WriteString("\n")
		b.WriteString(updateLine(svc, r.elapsed))
		slots, tasks := r.s.SlotTasks(sid)
		for i, n := range slots {
			fmt.Fprintf(&b, "  %s:\n", r.slotName(svc, n))
			for k, t := range tasks[i] {
				fmt.Fprintf(&b, "    #%d %s\n", k+1, r.taskLine(t))
			}
		}
	}
	for _, nid := range r.s.NodeIDs() {
		n := r.s.Node(nid)
		var ids []string
		for _, t := range r.s.NodeTasks(nid) {
			ids = append(ids, shortID(t.ID))
		}
		fmt.Fprintf(&b, "node %s %s %s seq=%d", n.Name, n.Status, n.Availability, n.AssignSeq)
		if len(ids) > 0 {
			fmt.Fprintf(&b, " tasks=%s", strings.Join(ids, ","))
		}
		b.WriteString("\n")
	}
	for i, name := range r.nets {
		p := r.s.Pool(sm.NetworkID(i + 1))
		if p == nil {
			continue
		}
		fmt.Fprintf(&b, "pool %s %s free=%d held=%d quarantined=%d\n",
			name, p.Prefix(), p.Free(), p.Held(), p.Quarantined())
	}
	return b.String()
}

func (r *runner) vips(svc *sm.Service) string {
	var vs []string
	for i := range r.nets {
		if p := r.s.Pool(sm.NetworkID(i + 1)); p != nil {
			for _, a := range p.VIPs(uint64(svc.ID)) {
				vs = append(vs, a.String())
			}
		}
	}
	if len(vs) == 0 {
		return "none"
	}
	return strings.Join(vs, ",")
}

func (r *runner) taskLine(t *sm.Task) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s v%d desired=%s state=%s", shortID(t.ID), r.nodeName(t.Node),
		t.SpecVersion, t.Desired, t.Status.State)
	if t.Status.State.Terminal() || t.Status.ExitCode != 0 {
		fmt.Fprintf(&b, " exit=%d", t.Status.ExitCode)
	}
	if t.StartAt() != 0 && t.Desired == sm.DesiredReady {
		fmt.Fprintf(&b, " start-at=%s start-by=%s", r.elapsed(t.StartAt()), r.elapsed(t.StartBy()))
	}
	for i := t.History.Len() - 1; i >= 0; i-- {
		if e := t.History.At(i); e.Kind == sm.HistUnknown || e.Kind == sm.HistReconnect || e.Kind == sm.HistLost {
			fmt.Fprintf(&b, " conn=%s@%s", e.Kind, r.elapsed(e.At))
			break
		}
	}
	if t.StopReason != sm.StopNone {
		fmt.Fprintf(&b, " stopped=%s", t.StopReason)
	}
	for _, at := range t.Attachments {
		a := addr(at.Addr)
		state := "released"
		if !at.Released {
			if p := r.s.Pool(at.Network); p == nil {
				state = "no-pool"
			} else if st, err := p.State(a); err != nil {
				state = err.Error()
			} else {
				state = st.String()
			}
		}
		fmt.Fprintf(&b, " %s=%s:%s", r.netName(at.Network), a, state)
	}
	if t.Message() != "" {
		fmt.Fprintf(&b, " msg=%q", t.Message())
	}
	return b.String()
}

// specLine describes the spec task t runs:
//
//	t2 v1: the current spec (v3; v1 is not kept) image=v3 cpu=400 mem=0
func (r *runner) specLine(t *sm.Task) string {
	svc := r.s.Service(t.Service)
	sp, kept := svc.SpecAt(t.SpecVersion)
	which := "the current spec"
	switch {
	case !kept:
		which = fmt.Sprintf("the current spec (v%d; v%d is not kept)", svc.SpecVersion, t.SpecVersion)
	case t.SpecVersion != svc.SpecVersion:
		which = "the previous spec"
	}
	return fmt.Sprintf("%s v%d: %s image=%s cpu=%d mem=%d\n", shortID(t.ID), t.SpecVersion, which, sp.Image, sp.CPU, sp.Memory)
}

func addr(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
