package check

import (
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// agentsModel is the agents' side of the checker as it was kept before
// its tables were folded into one: a table of hand-overs, one of each
// task's address keys, one of each address's holder.
type agentsModel struct {
	handed  map[uint64]uint32
	held    map[uint64][]string
	holders map[string][2]uint64 // address key → node, task
	checked map[string]int64
	broken  map[string]int
}

// What the checker keeps of hand-overs, holds and releases is what the
// model keeps, and it counts the same checks and violations, after every
// step of random hand-overs, holds of 0–3 addresses (shared among tasks),
// releases, deletions from the stream and nodes gone.
func TestAgentsTablesMatchAModel(t *testing.T) {
	addrPool := []string{"10.0.0.2/24", "10.0.0.3/24", "10.0.0.4/24", "fd00::2/64"}
	rapid.Check(t, func(t *rapid.T) {
		c := New(t0)
		m := agentsModel{handed: map[uint64]uint32{}, held: map[uint64][]string{}, holders: map[string][2]uint64{},
			checked: map[string]int64{}, broken: map[string]int{}}
		for step := range rapid.IntRange(1, 80).Draw(t, "steps") {
			now := t0.Add(time.Duration(step) * time.Second)
			id := uint64(rapid.IntRange(1, 6).Draw(t, "task"))
			node := uint32(rapid.IntRange(1, 3).Draw(t, "node"))
			switch op := rapid.IntRange(0, 4).Draw(t, "op"); op {
			case 0:
				c.Handed(node, id, now)
				if prev, ok := m.handed[id]; ok && prev != node {
					m.checked[OwnNode]++
					m.broken[OwnNode]++
				} else if !ok {
					m.handed[id] = node
				}
			case 1:
				n := rapid.IntRange(0, 3).Draw(t, "addresses")
				var nets, addrs []string
				for range n {
					nets = append(nets, rapid.SampledFrom([]string{"net0", "net1"}).Draw(t, "net"))
					addrs = append(addrs, rapid.SampledFrom(addrPool).Draw(t, "addr"))
				}
				c.Hold(node, id, nets, addrs, now)
				if _, ok := m.held[id]; ok {
					break
				}
				keys := []string{}
				for i := range addrs {
					k := addrKey(nets[i], addrs[i])
					m.checked[AddressAgents]++
					if h, ok := m.holders[k]; ok && h[1] != id {
						m.broken[AddressAgents]++
						continue
					}
					m.holders[k] = [2]uint64{uint64(node), id}
					keys = append(keys, k)
				}
				m.held[id] = keys
			case 2:
				c.Release(id, now)
				for _, k := range m.held[id] {
					if m.holders[k][1] == id {
						delete(m.holders, k)
					}
				}
				delete(m.held, id)
			case 3:
				c.Event(deleted(strconv.FormatUint(id, 10)), 1, now)
				m.checked[NoVanish]++
				delete(m.handed, id)
			case 4:
				c.NodesGone([]uint32{node}, now)
				for k, h := range m.holders {
					if h[0] == uint64(node) {
						delete(m.holders, k)
						delete(m.held, h[1])
					}
				}
			}
			c.mu.Lock()
			handed := map[uint64]uint32{}
			held := map[uint64][]string{}
			for tid, r := range c.mu.agents {
				if !r.holds && !r.handedOK {
					t.Fatalf("step %d: task %d has a record that says nothing", step, tid)
				}
				if r.handedOK {
					handed[tid] = r.handedTo
				}
				if r.holds {
					keys := []string{}
					for _, k := range c.heldLocked(tid, r) {
						keys = append(keys, c.mu.addrs.name(k))
					}
					held[tid] = keys
				}
			}
			holders := map[string][2]uint64{}
			for k, h := range c.mu.agentAdr {
				holders[c.mu.addrs.name(k)] = [2]uint64{uint64(h.node), h.task}
			}
			c.mu.Unlock()
			if !maps.Equal(handed, m.handed) {
				t.Fatalf("step %d: handed %v, the model %v", step, handed, m.handed)
			}
			if !maps.EqualFunc(held, m.held, slices.Equal) {
				t.Fatalf("step %d: held %v, the model %v", step, held, m.held)
			}
			if !maps.Equal(holders, m.holders) {
				t.Fatalf("step %d: holders %v, the model %v", step, holders, m.holders)
			}
			for _, r := range c.Results() {
				if r.Checked != m.checked[r.Name] || r.Violations != m.broken[r.Name] {
					t.Fatalf("step %d: %s checked %d broken %d, the model %d, %d", step, r.Name, r.Checked, r.Violations,
						m.checked[r.Name], m.broken[r.Name])
				}
			}
		}
	})
}
