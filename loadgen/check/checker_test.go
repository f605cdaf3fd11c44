package check

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/api/client"
)

var t0 = time.Unix(1_700_000_000, 0)

func taskEv(id, svc string, slot uint32, node uint32, desired, state string, addrs ...string) client.Event {
	t := &client.Task{ID: id, Service: svc, Slot: slot, Node: node, Desired: desired, State: state}
	for _, a := range addrs {
		released := strings.HasSuffix(a, "!")
		t.Addresses = append(t.Addresses, client.TaskAddress{Network: "net0", Addr: strings.TrimSuffix(a, "!"), Released: released})
	}
	return client.Event{Topic: "task", Type: "state", Key: id, Task: t}
}

func deleted(id string) client.Event { return client.Event{Topic: "task", Type: "deleted", Key: id} }

func violations(c *Checker, inv string) int {
	for _, r := range c.Results() {
		if r.Name == inv {
			return r.Violations
		}
	}
	return -1
}

// A correct life: an address is released by one task, confirmed, and reused
// by the next; the old task is deleted once terminal. Nothing is flagged.
func TestCleanStream(t *testing.T) {
	c := New(t0)
	for _, ev := range []client.Event{
		taskEv("1", "web", 1, 0, "running", "pending", "10.0.0.2/24"),
		taskEv("1", "web", 1, 5, "running", "assigned", "10.0.0.2/24"),
		taskEv("1", "web", 1, 5, "running", "running", "10.0.0.2/24"),
		taskEv("1", "web", 1, 5, "shutdown", "shutdown", "10.0.0.2/24"),
		taskEv("1", "web", 1, 5, "shutdown", "shutdown", "10.0.0.2/24!"),
		taskEv("2", "web", 1, 0, "running", "pending", "10.0.0.2/24"),
		deleted("1"),
		taskEv("2", "web", 1, 6, "running", "running", "10.0.0.2/24"),
	} {
		c.Event(ev, 1, t0)
	}
	c.Handed(5, 1, t0)
	c.Hold(5, 1, []string{"net0"}, []string{"10.0.0.2/24"}, t0)
	c.Release(1, t0)
	c.Handed(6, 2, t0)
	c.Hold(6, 2, []string{"net0"}, []string{"10.0.0.2/24"}, t0)
	c.Quiesced(map[string]int{"web": 1}, t0)
	if n := c.Count(); n != 0 {
		t.Fatalf("%d violations in a clean stream: %+v", n, c.Violations())
	}
}

// Planted bug: a manager hands an address to a new task while the old one,
// still running, holds it. Both checks of addresses catch it.
func TestPlantedAddressReuse(t *testing.T) {
	c := New(t0)
	c.Event(taskEv("1", "web", 1, 5, "running", "running", "10.0.0.2/24"), 1, t0)
	c.Event(taskEv("2", "api", 1, 6, "running", "assigned", "10.0.0.2/24"), 1, t0)
	sus := c.Suspects()
	if len(sus) != 1 || sus[0].Tasks != [2]uint64{1, 2} || sus[0].Addr != addrKey("net0", "10.0.0.2/24") {
		t.Fatalf("address held by two live tasks not suspected: %+v", sus)
	}
	// The replicated state agrees: both hold it.
	c.Confirm(sus[0], taskEv("1", "web", 1, 5, "running", "running", "10.0.0.2/24").Task,
		taskEv("2", "api", 1, 6, "running", "assigned", "10.0.0.2/24").Task,
		taskEv("1", "web", 1, 5, "running", "running", "10.0.0.2/24").Task, t0)
	if violations(c, AddressLive) != 1 {
		t.Fatalf("address held by two live tasks not caught: %+v", c.Results())
	}
	// On the agents: node 5 still holds task 1 (not forgotten) when node 6
	// prepares task 2 with the same address — the freed-at-release bug.
	// The conflict names when each agent took it, the previous release,
	// and what the first holder's agent keeps (the probe).
	c.SetProbe(func(node uint32, task uint64) string { return fmt.Sprintf("node %d holds task %d", node, task) })
	c.Hold(7, 3, []string{"net0"}, []string{"10.0.0.2/24"}, t0)
	c.Release(3, t0.Add(time.Second))
	c.Hold(5, 1, []string{"net0"}, []string{"10.0.0.2/24"}, t0.Add(2*time.Second))
	c.Hold(6, 2, []string{"net0"}, []string{"10.0.0.2/24"}, t0.Add(3*time.Second))
	if violations(c, AddressAgents) != 1 {
		t.Fatalf("address held by two agents not caught: %+v", c.Results())
	}
	v := c.Violations()
	if len(v) != 2 || !strings.Contains(v[1].Message, "task 1 (node 5) and task 2 (node 6)") || len(v[0].Objects) != 4 {
		t.Fatalf("violation lacks the objects involved: %+v", v)
	}
	want := []string{"task 1 took it on node 5 at 2s; task 2 on node 6 at 3s",
		"before them, task 3 (node 7) let it go at 1s", "the agent of node 5: node 5 holds task 1"}
	if got := v[1].Objects[2:]; !slices.Equal(got, want) {
		t.Fatalf("conflict details\n got %q\nwant %q", got, want)
	}
}

// Planted bug: an agent is handed a task the manager placed on another
// node; caught whichever arrives first, the assignment or the event.
func TestPlantedForeignTask(t *testing.T) {
	c := New(t0)
	c.Event(taskEv("7", "web", 2, 3, "running", "assigned"), 1, t0)
	c.Handed(4, 7, t0)
	c.Handed(9, 8, t0) // before the stream shows task 8
	c.Event(taskEv("8", "web", 3, 3, "running", "assigned"), 1, t0)
	if violations(c, OwnNode) != 2 {
		t.Fatalf("foreign tasks not caught: %+v", c.Violations())
	}
}

// Planted bugs: a running task deleted; a state moving back; two running
// tasks in one slot and a wrong running count at quiescence.
func TestPlantedLifecycleBugs(t *testing.T) {
	c := New(t0)
	c.Event(taskEv("1", "web", 1, 5, "running", "running"), 1, t0)
	c.Event(deleted("1"), 1, t0)
	if violations(c, NoVanish) != 1 {
		t.Fatalf("running task deleted not caught: %+v", c.Violations())
	}
	c.Event(taskEv("2", "web", 1, 5, "running", "running"), 1, t0)
	c.Event(taskEv("2", "web", 1, 5, "running", "starting"), 1, t0)
	if violations(c, Monotone) != 1 {
		t.Fatalf("backwards state not caught: %+v", c.Violations())
	}
	// On another connection (a lagging replica) an older object is not a
	// violation, and is not merged.
	c.Event(taskEv("2", "web", 1, 5, "running", "assigned"), 2, t0)
	if violations(c, Monotone) != 1 {
		t.Fatalf("lagging replica's object flagged: %+v", c.Violations())
	}
	c.Event(taskEv("3", "web", 1, 6, "running", "running"), 1, t0)
	c.Event(taskEv("4", "gone", 1, 6, "running", "running"), 1, t0)
	c.Quiesced(map[string]int{"web": 1}, t0)
	if violations(c, OnePerSlot) != 1 || violations(c, AsDesired) != 2 {
		t.Fatalf("quiescence bugs not caught: %+v", c.Violations())
	}
	// A pending task deleted (flagged remove before placement) is fine.
	c.Event(taskEv("5", "web", 2, 0, "running", "pending"), 1, t0)
	c.Event(deleted("5"), 1, t0)
	if violations(c, NoVanish) != 1 {
		t.Fatalf("pending task deletion flagged: %+v", c.Violations())
	}
}

// The stream renders objects as they are when sent: a new task's event can
// show the address it got after the old task's deletion, ahead of that
// deletion's event. The view suspects a conflict; the replicated state
// (the old task gone, or released, or terminal) clears it.
func TestAddressSuspectClearedByState(t *testing.T) {
	c := New(t0)
	c.Event(taskEv("1", "web", 1, 0, "running", "pending", "10.0.0.2/24"), 1, t0)
	c.Event(taskEv("2", "web", 1, 0, "ready", "pending", "10.0.0.2/24"), 1, t0) // rendered after 1's deletion
	c.Event(deleted("1"), 1, t0)
	sus := c.Suspects()
	if len(sus) != 1 {
		t.Fatalf("no suspect: %+v", sus)
	}
	now2 := taskEv("2", "web", 1, 0, "ready", "pending", "10.0.0.2/24").Task
	held := taskEv("1", "web", 1, 0, "running", "pending", "10.0.0.2/24").Task
	for _, old := range []*client.Task{
		nil, // deleted
		taskEv("1", "web", 1, 5, "shutdown", "shutdown", "10.0.0.2/24").Task, // terminal
		taskEv("1", "web", 1, 5, "shutdown", "running", "10.0.0.2/24!").Task, // released
	} {
		c.Confirm(sus[0], old, now2, old, t0)
		// Read holding it, then the second read holding it, then gone:
		// the first let it go between the reads (deleted while pending).
		c.Confirm(sus[0], held, now2, old, t0)
	}
	if n := c.Count(); n != 0 {
		t.Fatalf("a suspect the state cleared was counted: %+v", c.Violations())
	}
	if len(c.Suspects()) != 0 {
		t.Fatal("a suspect was handed out twice")
	}
}

// A suspect whose tasks could not be read comes back once at the next
// Suspects, and counts nothing until it is settled.
func TestRequeuedSuspectIsHandedOutAgain(t *testing.T) {
	c := New(t0)
	c.Event(taskEv("1", "web", 1, 0, "running", "pending", "10.0.0.2/24"), 1, t0)
	c.Event(taskEv("2", "web", 1, 0, "ready", "pending", "10.0.0.2/24"), 1, t0)
	sus := c.Suspects()
	if len(sus) != 1 {
		t.Fatalf("no suspect: %+v", sus)
	}
	c.Requeue(sus[0])
	again := c.Suspects()
	if len(again) != 1 || again[0].Addr != sus[0].Addr || again[0].Tasks != sus[0].Tasks {
		t.Fatalf("requeued suspect not handed out again: %+v", again)
	}
	if len(c.Suspects()) != 0 || c.Count() != 0 {
		t.Fatalf("handed out twice or counted before being settled: %d", c.Count())
	}
}

// Property: after any sequence of task events (states up and down, object-
// less events, deletions, full resets, other connections), ByState equals
// the views counted one by one.
func TestByStateCountsTheView(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	for round := range 200 {
		c := New(t0)
		for range 300 {
			id := strconv.Itoa(1 + r.IntN(20))
			conn := 1 + r.IntN(2)
			switch k := r.IntN(20); {
			case k == 0:
				c.Event(deleted(id), conn, t0)
			case k == 1:
				c.Event(client.Event{Topic: "task", Type: "state", Key: id}, conn, t0)
			case k == 2:
				var list []client.Task
				for j := range r.IntN(5) {
					list = append(list, *taskEv(strconv.Itoa(j+1), "web", 1, 3, "running", States[r.IntN(len(States))]).Task)
				}
				c.Reset(list, conn, t0)
			default:
				c.Event(taskEv(id, "web", 1, 3, "running", States[r.IntN(len(States))]), conn, t0)
			}
		}
		want := make([]int, len(States))
		c.mu.Lock()
		for _, v := range c.mu.tasks {
			if v.rank >= 0 {
				want[v.rank]++
			}
		}
		c.mu.Unlock()
		if got := c.ByState(); !slices.Equal(got, want) {
			t.Fatalf("round %d: ByState %v, the views count %v", round, got, want)
		}
	}
}

// BenchmarkReset merges a full task list of 100,000 tasks (a resync).
func BenchmarkReset(b *testing.B) {
	list := make([]client.Task, 100000)
	for i := range list {
		list[i] = *taskEv(strconv.Itoa(i+1), "svc-"+strconv.Itoa(i%100), uint32(i/100+1), uint32(i%1000+1), "running", "running",
			fmt.Sprintf("10.%d.%d.%d/16", i%100, i/256%256, i%256)).Task
	}
	c := New(t0)
	for b.Loop() {
		c.Reset(list, 1, t0)
	}
}

// A fleet worker that died took its agents' processes with it: what the
// nodes of that worker held is not counted as held once NodesGone says
// so, while what live nodes hold still is.
func TestGoneNodesHoldNothing(t *testing.T) {
	c := New(t0)
	c.Hold(5, 1, []string{"net0"}, []string{"10.0.0.2/24"}, t0)
	c.Hold(6, 2, []string{"net0"}, []string{"10.0.0.3/24"}, t0)
	c.NodesGone([]uint32{5, 9}, t0.Add(time.Second))
	c.Hold(7, 3, []string{"net0"}, []string{"10.0.0.2/24"}, t0.Add(2*time.Second)) // freed by the orphan timeout
	if n := violations(c, AddressAgents); n != 0 {
		t.Fatalf("an address of a dead node's process counted as held: %+v", c.Violations())
	}
	c.Hold(7, 4, []string{"net0"}, []string{"10.0.0.3/24"}, t0.Add(2*time.Second)) // node 6 lives and holds it
	if n := violations(c, AddressAgents); n != 1 {
		t.Fatalf("a live node's address taken by another task: %d violations, want 1", n)
	}
}

// BenchmarkRampEvents checks a ramp's task events: 20,000 tasks, each
// rendered pending, assigned, starting and running with one address.
func BenchmarkRampEvents(b *testing.B) {
	const n = 20000
	var evs []client.Event
	for _, st := range []string{"pending", "assigned", "starting", "running"} {
		for i := range n {
			node := uint32(i%1000 + 1)
			if st == "pending" {
				node = 0
			}
			evs = append(evs, taskEv(strconv.Itoa(i+1), "svc-"+strconv.Itoa(i%100), uint32(i/100+1), node, "running", st,
				fmt.Sprintf("10.%d.%d.%d/16", i%100, i/256%256, i%256)))
		}
	}
	b.ResetTimer()
	cpu0 := cpuNs()
	for b.Loop() {
		c := New(t0)
		for _, ev := range evs {
			c.Event(ev, 1, t0)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
	b.ReportMetric(float64(cpuNs()-cpu0)/float64(b.N*len(evs)), "cpu-ns/event")
}

// Checking a task's unchanged addresses in place ends where letting go of
// them and taking them anew ends: the same suspects, results, counts and
// address owners after every event of a random stream.
func TestRecheckInPlaceIsTheGeneralPath(t *testing.T) {
	states := []string{"pending", "assigned", "starting", "running", "complete", "shutdown"}
	addrs := []string{"10.0.0.2/24", "10.0.0.3/24", "10.0.0.4/24", "10.0.0.2/24!", "10.0.0.3/24!"}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		fast, slow := New(t0), New(t0)
		for step := range 60 {
			id := strconv.Itoa(rng.IntN(6) + 1)
			var ev client.Event
			if rng.IntN(10) == 0 {
				ev = deleted(id)
			} else {
				var held []string
				for range rng.IntN(3) {
					held = append(held, addrs[rng.IntN(len(addrs))])
				}
				ev = taskEv(id, "web", 1, uint32(rng.IntN(3)+1), "running", states[rng.IntN(len(states))], held...)
			}
			now := t0.Add(time.Duration(step) * time.Second)
			recheckInPlace = true
			fast.Event(ev, 1, now)
			recheckInPlace = false
			slow.Event(ev, 1, now)
			recheckInPlace = true
			if f, s := fmt.Sprint(fast.Suspects(), fast.Results(), fast.mu.liveAddr, fast.mu.checked), fmt.Sprint(slow.Suspects(), slow.Results(), slow.mu.liveAddr, slow.mu.checked); f != s {
				t.Fatalf("seed %d step %d (%s %s): in place\n%s\ngeneral\n%s", seed, step, ev.Type, id, f, s)
			}
		}
	}
}

// The checker counts each invariant's checks at its place in Names.
func TestInvariantPlacesAreNames(t *testing.T) {
	places := map[int]string{ixAddressAgents: AddressAgents, ixAddressLive: AddressLive, ixNoVanish: NoVanish,
		ixMonotone: Monotone, ixTaskShape: TaskShape, ixOwnNode: OwnNode, ixOnePerSlot: OnePerSlot,
		ixAsDesired: AsDesired, ixReplicasAgree: ReplicasAgree, ixHeldAside: HeldAside}
	if len(places) != nInvariants || len(Names) != nInvariants {
		t.Fatalf("%d places, %d names, %d invariants", len(places), len(Names), nInvariants)
	}
	for i, n := range Names {
		if places[i] != n.Name {
			t.Errorf("place %d counts %q, Names has %q there", i, places[i], n.Name)
		}
	}
}

// A task's view keeps the node its agent was handed it on in step with the
// handed table, whichever comes first (the hand-over or the stream's
// event), across deletions and resyncs.
func TestViewKeepsHandedInStep(t *testing.T) {
	states := []string{"pending", "assigned", "starting", "running", "shutdown"}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 3))
		c := New(t0)
		for step := range 300 {
			id := strconv.Itoa(1 + rng.IntN(12))
			node := uint32(1 + rng.IntN(3))
			switch rng.IntN(10) {
			case 0, 1, 2:
				n, _ := strconv.ParseUint(id, 10, 64)
				c.Handed(node, n, t0)
			case 3:
				c.Event(deleted(id), 1, t0)
			case 4:
				var list []client.Task
				for range rng.IntN(6) {
					list = append(list, *taskEv(strconv.Itoa(1+rng.IntN(12)), "svc", 1, node, "running", states[rng.IntN(len(states))]).Task)
				}
				c.Reset(list, 1+step, t0)
			default:
				c.Event(taskEv(id, "svc", 1, node, "running", states[rng.IntN(len(states))]), 1+step/50, t0)
			}
			c.mu.Lock()
			for tid, v := range c.mu.tasks {
				r := c.mu.agents[tid]
				n, ok := r.handedTo, r.handedOK
				if v.handedTo != n || v.handedOK != ok {
					c.mu.Unlock()
					t.Fatalf("seed %d step %d: task %d's view says handed (%d, %v), the table (%d, %v)", seed, step, tid, v.handedTo, v.handedOK, n, ok)
				}
			}
			c.mu.Unlock()
		}
	}
}
