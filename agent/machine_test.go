package agent

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	sm "shoal/statemachine"
	"shoal/wire"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var webSpec = wire.Spec{Service: "web", Version: 1, Command: []string{"sleep", "1000"}, StopGrace: int64(3 * time.Second)}

func asg(id sm.TaskID, d sm.DesiredState) wire.Assignment {
	return wire.Assignment{Task: id, Service: "web", Slot: uint32(id), SpecVersion: 1, Desired: d, State: sm.StateAssigned}
}

func completeFrame(at uint64, tasks ...wire.Assignment) *wire.Assignments {
	return &wire.Assignments{Kind: wire.FrameComplete, Last: true, ResultsIn: wire.Cursor{at}, Seqs: []uint64{at},
		Specs: []wire.Spec{webSpec}, Tasks: tasks}
}

func incFrame(from, to uint64, tasks []wire.Assignment, removed ...sm.TaskID) *wire.Assignments {
	return &wire.Assignments{Kind: wire.FrameIncremental, Last: true, AppliesTo: wire.Cursor{from}, ResultsIn: wire.Cursor{to},
		Seqs: []uint64{to}, Tasks: tasks, Removed: removed}
}

// acts renders the machine's pending actions as "prepare 1, start 2".
func acts(rd Ready) string {
	var s []string
	for _, a := range rd.Actions {
		s = append(s, a.String())
	}
	return strings.Join(s, ", ")
}

func states(m *Machine) string {
	var s []string
	for _, id := range m.sortedIDs() {
		t := m.tasks[id]
		s = append(s, fmt.Sprintf("%d:%v", id, t.status.State))
	}
	return strings.Join(s, " ")
}

func expect(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s:\n got %q\nwant %q", what, got, want)
	}
}

func TestMachineLifecycle(t *testing.T) {
	m := NewMachine(MachineConfig{})
	if err := m.Apply(completeFrame(5, asg(1, sm.DesiredRunning), asg(2, sm.DesiredShutdown), asg(3, sm.DesiredReady)), t0); err != nil {
		t.Fatal(err)
	}
	rd := m.Ready()
	expect(t, "after COMPLETE", acts(rd), "prepare 1, prepare 3")
	expect(t, "states", states(m), "1:preparing 2:shutdown 3:preparing")
	if rd.Writes.Meta == nil || rd.Writes.Meta.Cursor.Get(0) != 5 || len(rd.Writes.Tasks) != 3 || !rd.Writes.Sync {
		t.Fatalf("writes: %+v", rd.Writes)
	}
	if rd.Actions[0].Run == nil || rd.Actions[0].Run.Spec.Command[0] != "sleep" {
		t.Fatalf("prepare carries no spec: %+v", rd.Actions[0])
	}

	m.Observe(Event{Task: 1, Obs: Observation{Kind: ObsPrepared}}, t0)
	m.Observe(Event{Task: 3, Obs: Observation{Kind: ObsPrepared}}, t0)
	expect(t, "prepared", acts(m.Ready()), "start 1")
	m.Observe(Event{Task: 1, Obs: Observation{Kind: ObsStarted, Handle: Handle{Pid: 42, StartTime: 9}}}, t0)
	rd = m.Ready()
	expect(t, "started", states(m), "1:running 2:shutdown 3:ready")
	if len(rd.Writes.Tasks) != 1 || rd.Writes.Tasks[0].Handle.Pid != 42 {
		t.Fatalf("handle not persisted: %+v", rd.Writes.Tasks)
	}

	// Promote 3 to running, scale away 1 (removed: stopped, then forgotten).
	if err := m.Apply(incFrame(5, 6, []wire.Assignment{asg(3, sm.DesiredRunning)}, 1), t0); err != nil {
		t.Fatal(err)
	}
	rd = m.Ready()
	expect(t, "promote and remove", acts(rd), "start 3, stop 1")
	if rd.Actions[1].Grace != 3*time.Second {
		t.Fatalf("stop grace %v", rd.Actions[1].Grace)
	}
	m.Observe(Event{Task: 1, Obs: Observation{Kind: ObsExited, ExitCode: 143}}, t0)
	rd = m.Ready()
	expect(t, "removed task exited", acts(rd), "forget 1")
	if len(rd.Writes.Deleted) != 1 || rd.Writes.Deleted[0] != 1 {
		t.Fatalf("removed task not deleted: %+v", rd.Writes)
	}
	for _, r := range rd.Writes.Tasks {
		if r.Assignment.Task == 1 {
			t.Fatalf("a deleted task is written in the same batch: %+v", r)
		}
	}
	expect(t, "held", fmt.Sprint(m.Held()), "[2 3]")

	// A COMPLETE without 2 and 3: 3 (starting) is stopped once started; 2 is forgotten at once.
	if err := m.Apply(completeFrame(9), t0); err != nil {
		t.Fatal(err)
	}
	expect(t, "complete empties", acts(m.Ready()), "forget 2")
	m.Observe(Event{Task: 3, Obs: Observation{Kind: ObsStarted, Handle: Handle{Pid: 43}}}, t0)
	expect(t, "started after removal", acts(m.Ready()), "stop 3")
	m.Observe(Event{Task: 3, Obs: Observation{Kind: ObsExited}}, t0)
	expect(t, "gone", acts(m.Ready()), "forget 3")
	if len(m.tasks) != 0 || m.Unacked() != 0 {
		t.Fatalf("left: %s, %d unacked", states(m), m.Unacked())
	}
}

func TestMachineGapDropsCursor(t *testing.T) {
	m := NewMachine(MachineConfig{})
	if err := m.Apply(completeFrame(5, asg(1, sm.DesiredRunning)), t0); err != nil {
		t.Fatal(err)
	}
	err := m.Apply(incFrame(4, 7, []wire.Assignment{asg(2, sm.DesiredRunning)}), t0)
	if !errors.Is(err, ErrGap) || len(m.Cursor()) != 0 || m.tasks[2] != nil {
		t.Fatalf("err %v, cursor %v, task 2 %v", err, m.Cursor(), m.tasks[2])
	}
	// A resync frame is a COMPLETE whatever its kind says.
	f := incFrame(0, 8, []wire.Assignment{asg(2, sm.DesiredRunning)})
	f.Resync = true
	if err := m.Apply(f, t0); err != nil {
		t.Fatal(err)
	}
	expect(t, "after resync", states(m), "1:shutdown 2:preparing")
	m.Observe(Event{Task: 1, Obs: Observation{Kind: ObsPrepared}}, t0)
	expect(t, "late prepare answer", acts(m.Ready()), "prepare 1, prepare 2, forget 1")
}

// An INCREMENTAL whose task is to start here but runs a spec the agent
// was never sent (the manager took it as sent with an answer this agent
// lost) is a gap: the machine asks for a COMPLETE instead of rejecting the
// task. A task already running, or one told to stop, needs no spec to go
// on and is applied as usual.
func TestMachineMissingSpecIsAGap(t *testing.T) {
	m := NewMachine(MachineConfig{})
	if err := m.Apply(completeFrame(5, asg(1, sm.DesiredRunning)), t0); err != nil {
		t.Fatal(err)
	}
	acts(m.Ready())
	api := asg(2, sm.DesiredRunning)
	api.Service = "api"
	err := m.Apply(incFrame(5, 7, []wire.Assignment{api}), t0)
	if !errors.Is(err, ErrGap) || len(m.Cursor()) != 0 || m.tasks[2] != nil {
		t.Fatalf("err %v, cursor %v, task 2 %v; want a gap, no cursor, task 2 not taken", err, m.Cursor(), m.tasks[2])
	}
	if got := acts(m.Ready()); got != "" {
		t.Fatalf("actions %q after the gap, want none (no rejection)", got)
	}
	// The COMPLETE brings the spec: the task is prepared.
	c := completeFrame(8, asg(1, sm.DesiredRunning), api)
	c.Specs = append(c.Specs, wire.Spec{Service: "api", Version: 1, Command: []string{"serve"}})
	if err := m.Apply(c, t0); err != nil {
		t.Fatal(err)
	}
	expect(t, "after the complete", acts(m.Ready()), "prepare 2")

	stopping := asg(3, sm.DesiredShutdown)
	stopping.Service = "db"
	running := asg(4, sm.DesiredRunning)
	running.Service, running.State = "db", sm.StateRunning
	if err := m.Apply(incFrame(8, 9, []wire.Assignment{stopping, running}), t0); err != nil {
		t.Fatalf("tasks that need no spec to go on: %v", err)
	}
}

func TestMachineChunkedComplete(t *testing.T) {
	m := NewMachine(MachineConfig{})
	c1 := completeFrame(5, asg(1, sm.DesiredRunning))
	c1.Last = false
	c2 := completeFrame(5, asg(2, sm.DesiredRunning))
	c2.Specs = nil
	if err := m.Apply(c1, t0); err != nil || len(m.tasks) != 0 {
		t.Fatalf("first chunk applied early: %v %s", err, states(m))
	}
	if err := m.Apply(c2, t0); err != nil {
		t.Fatal(err)
	}
	expect(t, "chunks", acts(m.Ready()), "prepare 1, prepare 2")
}

func TestMachineRestoreAttachesAndHolds(t *testing.T) {
	m := NewMachine(MachineConfig{})
	_ = m.Apply(completeFrame(5, asg(1, sm.DesiredRunning), asg(2, sm.DesiredRunning), asg(3, sm.DesiredRunning)), t0)
	m.Observe(Event{Task: 1, Obs: Observation{Kind: ObsPrepared}}, t0)
	m.Observe(Event{Task: 1, Obs: Observation{Kind: ObsStarted, Handle: Handle{Pid: 42, StartTime: 9}}}, t0)
	m.Observe(Event{Task: 2, Obs: Observation{Kind: ObsPrepared}}, t0)
	st := NewMemStore()
	if rd := m.Ready(); st.Apply(&rd.Writes) != nil {
		t.Fatal("apply")
	}
	loaded, _ := st.Load()

	// Restart: 1 (running) and 2 (starting) are attached; 3 (preparing) waits for the manager.
	r := NewMachine(MachineConfig{})
	r.Restore(loaded)
	rd := r.Ready()
	expect(t, "restore", acts(rd), "attach 1, attach 2")
	if rd.Actions[0].Handle != (Handle{Pid: 42, StartTime: 9}) {
		t.Fatalf("attach without the persisted handle: %+v", rd.Actions[0])
	}
	r.Observe(Event{Task: 1, Obs: Observation{Kind: ObsStarted, Handle: Handle{Pid: 42, StartTime: 9}}}, t0)
	r.Observe(Event{Task: 2, Obs: Observation{Kind: ObsLost}}, t0)
	expect(t, "attached", states(r), "1:running 2:failed 3:preparing")
	expect(t, "nothing started before the manager speaks", acts(r.Ready()), "")
	if r.tasks[2].status.Message != MsgLost {
		t.Fatalf("lost message %q", r.tasks[2].status.Message)
	}
	// The manager moved 3 to shutdown while the agent was away: never started.
	if err := r.Apply(incFrame(5, 6, []wire.Assignment{asg(3, sm.DesiredShutdown)}), t0); err != nil {
		t.Fatal(err)
	}
	expect(t, "after the first frame", acts(r.Ready()), "")
	expect(t, "states", states(r), "1:running 2:failed 3:shutdown")
}

func TestMachineManagerKnowsMore(t *testing.T) {
	m := NewMachine(MachineConfig{})
	_ = m.Apply(completeFrame(5, asg(1, sm.DesiredRunning)), t0)
	m.Observe(Event{Task: 1, Obs: Observation{Kind: ObsPrepared}}, t0)
	m.Observe(Event{Task: 1, Obs: Observation{Kind: ObsStarted, Handle: Handle{Pid: 1}}}, t0)
	m.Ready()
	// The node monitor orphaned the task while the node was away: stop it, report nothing.
	a := asg(1, sm.DesiredShutdown)
	a.State = sm.StateOrphaned
	_ = m.Apply(incFrame(5, 6, []wire.Assignment{a}), t0)
	expect(t, "orphaned by the manager", acts(m.Ready()), "stop 1")
	m.Observe(Event{Task: 1, Obs: Observation{Kind: ObsExited, ExitCode: 143}}, t0)
	expect(t, "state", states(m), "1:orphaned")
	if m.Unacked() != 0 {
		t.Fatal("a status owed for a task the manager orphaned")
	}
}

func TestMachineDestroy(t *testing.T) {
	m := NewMachine(MachineConfig{})
	_ = m.Apply(completeFrame(5, asg(1, sm.DesiredRunning), asg(2, sm.DesiredRunning)), t0)
	m.Observe(Event{Task: 1, Obs: Observation{Kind: ObsPrepared}}, t0)
	m.Observe(Event{Task: 1, Obs: Observation{Kind: ObsStarted, Handle: Handle{Pid: 1}}}, t0)
	m.Observe(Event{Task: 1, Obs: Observation{Kind: ObsExited, ExitCode: 1}}, t0)
	m.Ready()
	m.Destroy([]sm.TaskID{1, 99}, t0)
	expect(t, "destroy", acts(m.Ready()), "forget 1")
	expect(t, "held", fmt.Sprint(m.Held()), "[2]")
	if m.tasks[1] == nil || m.tasks[1].status.State != sm.StateFailed {
		t.Fatal("a destroyed task still in the set lost its record")
	}
}

func TestMachineNoSpecRejects(t *testing.T) {
	m := NewMachine(MachineConfig{})
	f := completeFrame(5, asg(1, sm.DesiredRunning))
	f.Specs = nil
	_ = m.Apply(f, t0)
	expect(t, "actions", acts(m.Ready()), "")
	expect(t, "state", states(m), "1:rejected")
	if !strings.Contains(m.tasks[1].status.Message, "no spec") {
		t.Fatalf("message %q", m.tasks[1].status.Message)
	}
}

func TestMachineSessionOpenedDropsUnusedSpecs(t *testing.T) {
	m := NewMachine(MachineConfig{})
	f := completeFrame(5, asg(1, sm.DesiredRunning))
	f.Specs = append(f.Specs, wire.Spec{Service: "old", Version: 3})
	_ = m.Apply(f, t0)
	m.Ready()
	m.SessionOpened()
	rd := m.Ready()
	if len(rd.Writes.DeletedSpecs) != 1 || rd.Writes.DeletedSpecs[0] != (SpecKey{"old", 3}) || len(m.specs) != 1 {
		t.Fatalf("deleted %v, kept %d", rd.Writes.DeletedSpecs, len(m.specs))
	}
}
