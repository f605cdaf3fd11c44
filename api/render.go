package api

import (
	"fmt"
	"strconv"
	"time"

	"shoal/api/client"
	"shoal/manager/control"
	"shoal/statemachine"
)

func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// renderService renders svc as stored in group g's state st.
func renderService(g int, st *statemachine.State, svc *statemachine.Service) client.Service {
	out := client.Service{ID: uint32(svc.ID), Group: g, Spec: fromSpec(&svc.Spec), SpecVersion: svc.SpecVersion,
		ModifyIndex: svc.ModifyIndex, Removing: svc.Remove, Tasks: map[string]int{},
		Update: client.UpdateStatus{State: svc.Update.State.String(), StartedAt: unixTime(svc.Update.StartedAt),
			CompletedAt: unixTime(svc.Update.CompletedAt), Message: svc.Update.Message, Failures: svc.Update.Failures}}
	c := st.CountServiceTasks(svc.ID)
	for state, n := range c.ByState {
		if n > 0 {
			out.Tasks[statemachine.TaskState(state).String()] = n
		}
	}
	out.Running, out.RunningAny = c.Running, c.RunningAny
	switch {
	case svc.Remove:
		out.Desired = 0
	case svc.Spec.Mode == statemachine.ModeReplicated:
		out.Desired = int(svc.Spec.Replicas)
	default:
		// A global service wants one task per eligible node; the
		// orchestrator creates exactly those slots.
		out.Desired = c.Active
	}
	out.Convergence = convergence(st, svc, c, out.Desired)
	return out
}

// convergence says whether svc settled: every wanted slot holds a task of
// the current spec running, or one that ended there for good (the state's
// Settled: completed one-shot tasks, unless the service restarts completed
// tasks; failed ones it will not restart), and no update is in flight. A
// paused update is settled but not converged: the old version's tasks serve
// on until the user acts.
func convergence(st *statemachine.State, svc *statemachine.Service, c statemachine.ServiceCounts, desired int) client.Convergence {
	switch svc.Update.State {
	case statemachine.Updating, statemachine.RollbackStarted:
		what := "update"
		if svc.Update.State == statemachine.RollbackStarted {
			what = "rollback"
		}
		return client.Convergence{State: client.Converging, Why: fmt.Sprintf("the %s to v%d is under way: %d/%d running at v%d, %d of any version",
			what, svc.SpecVersion, c.Running, desired, svc.SpecVersion, c.RunningAny)}
	case statemachine.UpdatePaused, statemachine.RollbackPaused:
		return client.Convergence{State: client.UpdatePaused, Why: fmt.Sprintf("the update of %s paused with %d/%d running, %d at v%d: %s",
			svc.Spec.Name, c.RunningAny, desired, c.Running, svc.SpecVersion, svc.Update.Message)}
	}
	if c.Running >= desired {
		return client.Convergence{State: client.Converged}
	}
	settled, failed := st.Settled(svc.ID)
	if settled < desired {
		return client.Convergence{State: client.Converging, Why: fmt.Sprintf("%d/%d running at v%d", c.Running, desired, svc.SpecVersion)}
	}
	out := client.Convergence{State: client.Converged, Failed: failed}
	if failed > 0 {
		why := "restart condition none"
		if svc.Spec.Restart.Condition != statemachine.RestartNone {
			why = "restart attempts used up"
		}
		out.Why = fmt.Sprintf("%d task(s) of %s failed and will not be restarted (%s)", failed, svc.Spec.Name, why)
	}
	return out
}

// renderTask renders t; withHistory adds its history entries.
func renderTask(st *statemachine.State, t *statemachine.Task, withHistory bool) client.Task {
	var out client.Task
	renderTaskTo(&out, st, t, withHistory)
	return out
}

// renderTaskTo is renderTask into out, whose Addresses' room it reuses
// (the event streams render every task into one value; an empty list is
// written as none, as is nil).
func renderTaskTo(out *client.Task, st *statemachine.State, t *statemachine.Task, withHistory bool) {
	*out = client.Task{ID: strconv.FormatUint(uint64(t.ID), 10), Slot: t.Slot, SpecVersion: t.SpecVersion,
		Node: uint32(t.Node), Desired: t.Desired.String(), State: t.Status.State.String(),
		ExitCode: t.Status.ExitCode, Message: t.Message(), Since: unixTime(t.Status.Timestamp),
		Addresses: out.Addresses[:0]}
	if svc := st.Service(t.Service); svc != nil {
		out.Service = svc.Spec.Name
	}
	if n := st.Node(t.Node); n != nil {
		out.NodeName = n.Name
	}
	for _, a := range t.Attachments {
		ta := client.TaskAddress{Addr: control.AttachmentAddr(st, a), Released: a.Released}
		if nw := st.Network(a.Network); nw != nil {
			ta.Network = nw.Name
		}
		out.Addresses = append(out.Addresses, ta)
	}
	if withHistory {
		for i := range t.History.Len() {
			h := t.History.At(i)
			out.History = append(out.History, client.HistoryEntry{At: unixTime(h.At), Kind: h.Kind.String(),
				State: h.State.String(), By: h.By.String(), Desired: h.Desired.String()})
		}
	}
}

// renderNode renders n; tasks counts its live tasks (summed by the caller
// over service groups).
func renderNode(n *statemachine.Node) client.Node {
	return client.Node{ID: uint32(n.ID), Name: n.Name, Role: n.Role.String(), Labels: n.Labels, CPU: n.CPU,
		Memory: n.Memory, Availability: n.Availability.String(), Status: n.Status.String(),
		StatusSince: unixTime(n.StatusAt)}
}

// liveTasks counts a node's tasks at or past assigned and not terminal.
func liveTasks(st *statemachine.State, id statemachine.NodeID) int {
	n := 0
	for _, t := range st.NodeTasks(id) {
		if !t.Status.State.Terminal() {
			n++
		}
	}
	return n
}
