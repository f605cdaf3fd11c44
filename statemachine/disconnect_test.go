package statemachine

import "testing"

// An unknown task stopped before its window ends leaves the unknown index
// at the next timer pass, not only at its window's end: a pass that finds
// its queue entry first drops both.
func TestStoppedUnknownTasksLeaveTheIndex(t *testing.T) {
	s := buildRunning(t, 1, 10, 2)
	var out Output
	step := func(cmds ...Command) {
		t.Helper()
		s.Apply(cmds, s.LastIndex()+1, s.LastTime()+1e6, &out)
		for _, r := range out.Results {
			if r.Code != CodeOK {
				t.Fatalf("%v", r.Err())
			}
		}
	}
	spec := s.ServiceByName("svc-0").Spec
	spec.Disconnect.LostAfter = 3600e9
	step(Command{Kind: CmdUpdateService, Spec: &spec})
	step(Command{Kind: CmdSetNodeStatus, Node: 1, NodeStatus: NodeDisconnected})
	if len(s.unknown) != 5 {
		t.Fatalf("%d unknown tasks after node 1 left, want 5", len(s.unknown))
	}
	step(Command{Kind: CmdRemoveService, Name: "svc-0"})
	s.nextDue = s.LastTime() + 1e6 // another timer is due now
	step(Command{Kind: CmdTick})
	if len(s.unknown) != 0 {
		t.Fatalf("%d stopped tasks still indexed as unknown after a timer pass", len(s.unknown))
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
