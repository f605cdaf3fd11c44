package agent

import (
	"testing"
	"unsafe"

	sm "shoal/statemachine"
	"shoal/wire"
)

// A decoded frame's strings share one backing string; what the machine
// keeps from it (its tasks, their addresses, the specs) is copied, so a
// task kept long after its frame does not hold the whole frame's text.
func TestMachineKeepsNoStringOfItsFrame(t *testing.T) {
	a := asg(1, sm.DesiredRunning)
	a.Addresses = []wire.Address{{Network: "front", Addr: "10.0.0.5/24"}}
	b, err := wire.Append(nil, completeFrame(5, a, asg(2, sm.DesiredRunning)))
	if err != nil {
		t.Fatal(err)
	}
	var f wire.Assignments
	if err := wire.DecodeInto(b, &f); err != nil {
		t.Fatal(err)
	}
	m := NewMachine(MachineConfig{})
	if err := m.Apply(&f, t0); err != nil {
		t.Fatal(err)
	}
	same := func(x, y string) bool { return len(x) > 0 && unsafe.StringData(x) == unsafe.StringData(y) }
	kept := m.tasks[1].a
	for what, pair := range map[string][2]string{
		"the task's service":    {kept.Service, f.Tasks[0].Service},
		"the address's network": {kept.Addresses[0].Network, f.Tasks[0].Addresses[0].Network},
		"the address":           {kept.Addresses[0].Addr, f.Tasks[0].Addresses[0].Addr},
		"the spec's service":    {m.specs[SpecKey{"web", 1}].Service, f.Specs[0].Service},
		"the spec's command":    {m.specs[SpecKey{"web", 1}].Command[0], f.Specs[0].Command[0]},
	} {
		if same(pair[0], pair[1]) {
			t.Errorf("the machine keeps %s inside the decoded frame's string", what)
		}
	}
	if kept.Service != "web" || kept.Addresses[0].Addr != "10.0.0.5/24" {
		t.Fatalf("kept task %+v: the copy changed it", kept)
	}
}
