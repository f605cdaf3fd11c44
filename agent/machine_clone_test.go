package agent

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"pgregory.net/rapid"

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

// sharedString reports the first string of got that shares its bytes with
// the string at the same place in from ("" when none).
func sharedString(got, from []string) string {
	for i := range min(len(got), len(from)) {
		if len(got[i]) > 0 && unsafe.StringData(got[i]) == unsafe.StringData(from[i]) {
			return got[i]
		}
	}
	return ""
}

func specStrings(s wire.Spec) []string {
	return append(append([]string{s.Service, s.Dir}, s.Command...), s.Env...)
}

func asgStrings(a wire.Assignment) []string {
	out := []string{a.Service}
	for _, ad := range a.Addresses {
		out = append(out, ad.Network, ad.Addr)
	}
	return out
}

func drawStrings(t *rapid.T, label string) []string {
	switch rapid.IntRange(0, 3).Draw(t, label+"Kind") {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	return rapid.SliceOfN(rapid.StringN(0, 6, -1), 1, 4).Draw(t, label)
}

func drawAddresses(t *rapid.T, label string) []wire.Address {
	ss := drawStrings(t, label)
	if ss == nil {
		return nil
	}
	out := []wire.Address{}
	for i := 0; i+1 < len(ss); i += 2 {
		out = append(out, wire.Address{Network: ss[i], Addr: ss[i+1]})
	}
	return out
}

// What the machine keeps of a frame is the frame's, to the byte and to
// nil-ness, in strings of its own: a spec's or a task's strings are
// copied into one string each and cut from it.
func TestDetachIsACopy(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sp := wire.Spec{Service: rapid.StringN(0, 8, -1).Draw(t, "service"), Version: 3, Dir: rapid.StringN(0, 8, -1).Draw(t, "dir"),
			Command: drawStrings(t, "command"), Env: drawStrings(t, "env"), StopGrace: 5}
		got := detachSpec(sp)
		if !reflect.DeepEqual(got, sp) {
			t.Fatalf("detached spec %#v, want %#v", got, sp)
		}
		if s := sharedString(specStrings(got), specStrings(sp)); s != "" {
			t.Fatalf("the detached spec shares %q with the frame", s)
		}

		m := NewMachine(MachineConfig{})
		if rapid.Bool().Draw(t, "specHeld") {
			c := detachSpec(wire.Spec{Service: "web", Version: 1})
			m.specs[SpecKey{"web", 1}] = &c
		}
		old := wire.Assignment{Task: 1, Service: rapid.SampledFrom([]string{"", "web", "db"}).Draw(t, "oldService"),
			Addresses: drawAddresses(t, "oldAddresses")}
		old = m.detachAssignment(&old, &wire.Assignment{})
		a := wire.Assignment{Task: 1, Service: rapid.SampledFrom([]string{"", "web", "db"}).Draw(t, "service"), SpecVersion: 1,
			Slot: 4, Desired: sm.DesiredRunning, State: sm.StateAssigned, Addresses: drawAddresses(t, "addresses")}
		if rapid.Bool().Draw(t, "sameAddresses") && old.Addresses != nil {
			a.Addresses = nil
			for _, ad := range old.Addresses {
				a.Addresses = append(a.Addresses, wire.Address{Network: strings.Clone(ad.Network), Addr: strings.Clone(ad.Addr)})
			}
		}
		frame := wire.Assignment{Task: a.Task, Service: strings.Clone(a.Service), Slot: a.Slot, SpecVersion: a.SpecVersion,
			Desired: a.Desired, State: a.State, Addresses: slices.Clone(a.Addresses)}
		gotA := m.detachAssignment(&frame, &old)
		if !reflect.DeepEqual(gotA, a) {
			t.Fatalf("detached assignment %#v, want %#v", gotA, a)
		}
		if s := sharedString(asgStrings(gotA), asgStrings(frame)); s != "" {
			t.Fatalf("the detached assignment shares %q with the frame", s)
		}
		if len(frame.Addresses) > 0 && &gotA.Addresses[0] == &frame.Addresses[0] {
			t.Fatal("the detached assignment keeps the frame's addresses")
		}
	})
}

// The TaskRuns of a Ready's actions, and its specs, stay as they were
// until the next Ready, while the machine takes more frames and events
// and issues more actions.
func TestReadysBuffersLastUntilTheNextReady(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := NewMachine(MachineConfig{})
		sent := map[sm.TaskID]wire.Assignment{}
		specs := map[SpecKey]wire.Spec{}
		var cursor uint64
		var prepared []sm.TaskID
		next := sm.TaskID(1)
		type kept struct {
			acts         []Action
			runs         []TaskRun
			specs, given []wire.Spec
		}
		var last *kept
		check := func() {
			if last == nil {
				return
			}
			for i, a := range last.acts {
				if a.Run != nil && !reflect.DeepEqual(*a.Run, last.runs[i]) {
					t.Fatalf("action %v: its TaskRun changed before the next Ready: %+v, was %+v", a, *a.Run, last.runs[i])
				}
			}
			if !reflect.DeepEqual(last.given, last.specs) {
				t.Fatalf("the specs a Ready wrote changed before the next Ready: %+v, were %+v", last.given, last.specs)
			}
		}
		for step := range rapid.IntRange(1, 12).Draw(t, "steps") {
			if len(prepared) > 0 && rapid.Bool().Draw(t, fmt.Sprint("observe", step)) {
				for _, id := range prepared {
					m.Observe(Event{Task: id, Obs: Observation{Kind: ObsPrepared}}, t0)
				}
				prepared = nil
			} else {
				f := &wire.Assignments{Kind: wire.FrameIncremental, Last: true, AppliesTo: wire.Cursor{cursor},
					ResultsIn: wire.Cursor{cursor + 1}, Seqs: []uint64{cursor + 1}}
				if cursor == 0 {
					f.Kind, f.AppliesTo = wire.FrameComplete, nil
				}
				for range rapid.IntRange(0, 3).Draw(t, fmt.Sprint("specs", step)) {
					sp := wire.Spec{Service: rapid.SampledFrom([]string{"web", "db", "cache"}).Draw(t, "svc"), Version: uint32(rapid.IntRange(1, 3).Draw(t, "version")),
						Command: drawStrings(t, "cmd"), Env: drawStrings(t, "env")}
					if had, ok := specs[SpecKey{sp.Service, sp.Version}]; ok {
						sp = had // a spec version never changes: sent again as it was
					}
					f.Specs = append(f.Specs, sp)
					specs[SpecKey{sp.Service, sp.Version}] = sp
				}
				var keys []SpecKey
				for k := range specs {
					keys = append(keys, k)
				}
				slices.SortFunc(keys, func(a, b SpecKey) int {
					return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Version, b.Version))
				})
				for range rapid.IntRange(0, 40).Draw(t, fmt.Sprint("tasks", step)) {
					if len(keys) == 0 {
						break
					}
					k := rapid.SampledFrom(keys).Draw(t, "spec")
					a := wire.Assignment{Task: next, Service: k.Service, SpecVersion: k.Version, Slot: uint32(next), Desired: sm.DesiredRunning,
						State: sm.StateAssigned, Addresses: drawAddresses(t, "addrs")}
					f.Tasks = append(f.Tasks, a)
					sent[next] = a
					prepared = append(prepared, next)
					next++
				}
				cursor++
				if err := m.Apply(f, t0); err != nil {
					t.Fatal(err)
				}
			}
			check()
			rd := m.Ready()
			k := &kept{acts: rd.Actions, given: rd.Writes.Specs, specs: slices.Clone(rd.Writes.Specs)}
			for _, a := range rd.Actions {
				var run TaskRun
				if a.Run != nil {
					run = *a.Run
					want := sent[a.Task]
					sp := specs[SpecKey{want.Service, want.SpecVersion}]
					if run.Task != a.Task || run.Service != want.Service || run.Slot != want.Slot ||
						!reflect.DeepEqual(run.Addresses, want.Addresses) || !reflect.DeepEqual(*run.Spec, sp) {
						t.Fatalf("action %v runs %+v (spec %+v); the frame sent %+v with spec %+v", a, run, *run.Spec, want, sp)
					}
				}
				k.runs = append(k.runs, run)
			}
			for _, sp := range rd.Writes.Specs {
				if !reflect.DeepEqual(sp, specs[SpecKey{sp.Service, sp.Version}]) {
					t.Fatalf("spec written %+v, sent %+v", sp, specs[SpecKey{sp.Service, sp.Version}])
				}
			}
			last = k
		}
	})
}
