package agent

import (
	"testing"
	"time"

	sm "shoal/statemachine"
	"shoal/wire"
)

func dueIn(t *testing.T, m *Machine, now time.Time) time.Duration {
	t.Helper()
	at, ok := m.FlushDue()
	if !ok {
		t.Fatal("no flush due")
	}
	return at.Sub(now)
}

func TestStatusBatching(t *testing.T) {
	m := NewMachine(MachineConfig{})
	_ = m.Apply(completeFrame(5, asg(1, sm.DesiredRunning), asg(2, sm.DesiredRunning), asg(3, sm.DesiredRunning)), t0)
	m.Ready()
	if m.Unacked() != 3 {
		t.Fatalf("%d owed, want 3 (preparing)", m.Unacked())
	}
	if d := dueIn(t, m, t0); d > 0 {
		t.Fatalf("first urgent flush in %v, want now", d)
	}
	b := m.BeginBatch(2)
	if len(b) != 2 || b[0].Task != 1 || b[1].Task != 2 || b[0].State != sm.StatePreparing {
		t.Fatalf("batch %+v", b)
	}
	// While the batch is out, 1 moves on.
	m.Observe(Event{Task: 1, Obs: Observation{Kind: ObsPrepared}}, t0)
	m.Ready()
	if _, ok := m.FlushDue(); ok {
		t.Fatal("flush due while a batch is unanswered")
	}
	now := t0.Add(50 * time.Millisecond)
	m.EndBatch(b, &wire.StatusAck{Results: []wire.ReportResult{wire.ReportAccepted, wire.ReportRetry}}, now)
	rd := m.Ready()
	if rd.Writes.Sync {
		t.Fatal("an acknowledgement alone asked for a synced write")
	}
	if m.tasks[1].acked.State != sm.StatePreparing || m.tasks[2].acked.State != sm.StateAssigned {
		t.Fatalf("acked: 1 %v, 2 %v", m.tasks[1].acked.State, m.tasks[2].acked.State)
	}
	if m.Unacked() != 3 { // 1 moved on, 2 retry, 3 never sent
		t.Fatalf("%d owed, want 3", m.Unacked())
	}
	if d := dueIn(t, m, now); d != 200*time.Millisecond {
		t.Fatalf("urgent flush in %v, want 200ms after the last send", d)
	}
	now = now.Add(200 * time.Millisecond)
	b = m.BeginBatch(100)
	if len(b) != 3 {
		t.Fatalf("batch %+v", b)
	}
	m.EndBatch(b, nil, now) // transport error
	if d := dueIn(t, m, now); d != time.Second {
		t.Fatalf("after a failed send: flush in %v, want a full second", d)
	}
	now = now.Add(time.Second)
	b = m.BeginBatch(100)
	m.EndBatch(b, &wire.StatusAck{Results: []wire.ReportResult{wire.ReportAccepted, wire.ReportRejected, wire.ReportRetry}}, now)
	if m.Unacked() != 1 {
		t.Fatalf("%d owed, want 1 (the retry)", m.Unacked())
	}
	if d := dueIn(t, m, now); d != time.Second {
		t.Fatalf("a retried status goes in %v, want the routine second", d)
	}
	b = m.BeginBatch(100)
	m.EndBatch(b, &wire.StatusAck{}, now) // a short answer counts as retry
	if m.Unacked() != 1 {
		t.Fatal("a status without a result was taken as acknowledged")
	}
}

func TestStatusOnlyForTasksInTheSet(t *testing.T) {
	m := NewMachine(MachineConfig{})
	_ = m.Apply(completeFrame(5, asg(1, sm.DesiredRunning)), t0)
	_ = m.Apply(incFrame(5, 6, nil, 1), t0)
	if m.Unacked() != 0 {
		t.Fatal("a removed task's status is owed")
	}
}
