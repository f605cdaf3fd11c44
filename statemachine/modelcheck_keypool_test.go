package statemachine

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"shoal/ipam"
)

// The address pools' part of the model checker's state key, with tasks and
// nodes named as mcKeyPerm names them, so that node symmetry and the task-ID
// abstraction hold with addresses too (the pool's own encoding names holders
// by task ID and quarantine by node ID, which made every creation order and
// every node renaming a distinct state).
//
// Why it is sound: Apply reads task IDs only through equality and order,
// and new IDs are always above every existing one. Inside a slot the order
// is kept (position). Across slots, the order decides an outcome where
// tasks compete: tasks waiting for addresses are served oldest first, so
// the key lists the waiting tasks' names in ID order. Elsewhere slots are
// handled one by one with no shared budget in these bounds, so the order
// across slots only decides which fresh ID a new task gets, which the key
// abstracts. (Keeping every task's order broke node symmetry: the global
// service creates its tasks in node order. TestModelCheckKeyIsBisimulation
// checks the claim on explored states.) A holder that is no longer a task (deleted
// while its address was quarantined) is read only by "is it still a task"
// and "is it among the tasks the agent holds" (never: the agent lists live
// tasks), so it is named "gone". Sequence numbers are read only through
// comparisons of a node's quarantine entries with each other and with the
// node's AssignSeq (a sync reports AssignSeq and frees entries at or below
// it; releases take the current AssignSeq; assignments add one). In this
// model an agent's sync always reports its node's current AssignSeq (it has
// applied every assignment: the checker has no stale syncs), which is at or
// above every entry's, and an orphaned node frees all its entries: no
// comparison of sequence numbers ever decides anything, so the key keeps
// each node's quarantine as a set of (address, holder) pairs in address
// order, without sequence numbers (the order in which a release and
// another task's assignment to the node happened is not a state). A model
// with stale syncs must keep them (AssignSeq minus each entry's number).

// mcPoolFixed returns the prefix of a pool's encoding (ipam/encoding.go,
// version 1) up to and including the allocation cursors: subnet, name,
// gateway, block shift, reserved ranges, leases, cursors.
func mcPoolFixed(raw []byte) []byte {
	i := 4 + 1 + 4 + 1 // magic, version, subnet address, prefix length
	uv := func() uint64 {
		v, n := binary.Uvarint(raw[i:])
		if n <= 0 {
			panic("model checker: pool encoding is not version 1")
		}
		i += n
		return v
	}
	i += int(uv()) // name
	uv()           // gateway
	i++            // block shift
	for range 2 * uv() {
		uv() // reserved ranges
	}
	for range 2 * uv() {
		uv() // leases: block, owner
	}
	uv() // owner 0's cursor
	for range 2 * uv() {
		uv() // owners' cursors
	}
	return raw[:i]
}

// mcTaskName is a task's name in the key before nodes are renamed:
// service, slot (for a global service, its node), position in the slot.
type mcTaskName struct {
	service ServiceID
	slot    uint32
	pos     uint32
	global  bool
}

// mcTaskNames fills names with every task's name (once per key: the
// renamings only rename global slots).
func mcTaskNames(s *State, names map[TaskID]mcTaskName) {
	clear(names)
	for sid, svc := range s.services {
		for n, sl := range svc.slots.all() {
			for pos, t := range sl.tasks() {
				names[t.ID] = mcTaskName{service: sid, slot: n, pos: uint32(pos), global: svc.Spec.Mode == ModeGlobal}
			}
		}
	}
}

// taskName is task id's name under the renaming being hashed (0: gone).
func (sc *mcScratch) taskName(id TaskID) uint64 {
	tn, ok := sc.names[id]
	if !ok {
		return 0
	}
	n := tn.slot
	if tn.global {
		n = uint32(sc.mapNode(NodeID(n)))
	}
	return uint64(tn.service)<<40 | uint64(n)<<8 | uint64(tn.pos) + 1
}

// mcKeyPoolData is what the key reads of the pools and the waiting
// tasks, gathered once per state (mcPrepPools) and named under each
// renaming of the nodes (mcKeyPools).
type mcKeyPoolData struct {
	waits []TaskID
	holds []mcHold    // per pool, held addresses in address order
	quar  []mcQuarRaw // per pool, nodes with quarantine, ascending
	ents  []uint64    // quarantine entries: (address, holder) pairs, or with mcKeySeqs (seq, address, holder)
	pools []int       // pool i: holds[pools[3i]:pools[3i+1]], quar[pools[3i+1]:pools[3i+2]]
}

type mcHold struct {
	addr uint32
	kind ipam.Kind
	id   uint64 // a VIP's service, or a task
}

// mcQuarRaw is one node's quarantine: entries ents[lo:hi].
type mcQuarRaw struct {
	node   NodeID
	lo, hi int
}

// mcQuarNode is one node's quarantine in the key, named.
type mcQuarNode struct {
	node NodeID
	raw  int // index in quar
}

// mcPrepPools gathers the waiting tasks and the pools' holders and
// quarantines of s (in the order the key lists them, which no renaming
// changes: quarantine entries in address order, or with mcKeySeqs as the
// pool lists them).
func mcPrepPools(s *State, d *mcKeyPoolData, parts map[*ipam.Pool]*mcPoolPart) {
	d.waits = append(d.waits[:0], s.waitingIDs()...)
	d.holds, d.quar, d.ents, d.pools = d.holds[:0], d.quar[:0], d.ents[:0], d.pools[:0]
	for _, pid := range sortedKeys(s.pools) {
		p := s.pools[pid]
		// A shared pool's part is remembered: no state changes it in
		// place (poolW). With sequence numbers it depends on the nodes.
		shared := !s.poolsOwned[pid] && !mcKeySeqs
		if pp := parts[p]; shared && pp != nil {
			d.pools = append(d.pools, len(d.holds))
			d.holds = append(d.holds, pp.holds...)
			d.pools = append(d.pools, len(d.quar))
			for _, q := range pp.quar {
				d.quar = append(d.quar, mcQuarRaw{node: q.node, lo: len(d.ents), hi: len(d.ents) + q.hi - q.lo})
				d.ents = append(d.ents, pp.ents[q.lo:q.hi]...)
			}
			d.pools = append(d.pools, len(d.quar))
			continue
		}
		h0, q0 := len(d.holds), len(d.quar)
		d.pools = append(d.pools, len(d.holds))
		pfx := p.Prefix()
		for a, i := pfx.Masked().Addr(), 0; pfx.Contains(a) && i < 1<<10; a, i = a.Next(), i+1 {
			if h, ok := p.Holder(a); ok {
				d.holds = append(d.holds, mcHold{addr: addrU32(a), kind: h.Kind, id: h.ID})
			}
		}
		d.pools = append(d.pools, len(d.quar))
		for _, raw := range p.QuarantineNodes() {
			n := s.nodes[NodeID(raw)]
			var seq uint64
			if n != nil {
				seq = n.AssignSeq
			}
			q := mcQuarRaw{node: NodeID(raw), lo: len(d.ents)}
			for _, en := range p.Quarantine(raw) {
				if en.Seq > seq {
					panic("model checker: a quarantine entry newer than its node's assignment sequence")
				}
				if mcKeySeqs {
					d.ents = append(d.ents, seq-en.Seq, uint64(addrU32(en.Addr)), en.Holder)
					continue
				}
				// address, holder; in address order (insertion: a few entries)
				d.ents = append(d.ents, uint64(addrU32(en.Addr)), en.Holder)
				for j := len(d.ents) - 2; j > q.lo && d.ents[j-2] > d.ents[j]; j -= 2 {
					d.ents[j-2], d.ents[j] = d.ents[j], d.ents[j-2]
					d.ents[j-1], d.ents[j+1] = d.ents[j+1], d.ents[j-1]
				}
			}
			q.hi = len(d.ents)
			d.quar = append(d.quar, q)
		}
		d.pools = append(d.pools, len(d.quar))
		if shared {
			pp := &mcPoolPart{holds: slices.Clone(d.holds[h0:]), quar: slices.Clone(d.quar[q0:])}
			if len(pp.quar) > 0 {
				e0 := pp.quar[0].lo
				pp.ents = slices.Clone(d.ents[e0:])
				for i := range pp.quar {
					pp.quar[i].lo -= e0
					pp.quar[i].hi -= e0
				}
			}
			if len(parts) >= mcPoolsCap {
				clear(parts)
			}
			parts[p] = pp
		}
	}
}

// mcPoolPart is what mcPrepPools gathers of one pool, kept for shared
// pools (quar's lo and hi index ents).
type mcPoolPart struct {
	holds []mcHold
	quar  []mcQuarRaw
	ents  []uint64
}

// mcKeyPools appends the waiting tasks' names in ID order, then for every
// pool each held address with its holder and each node's quarantine,
// naming tasks and nodes as the key does (from mcPrepPools' data).
func mcKeyPools(sc *mcScratch) {
	e := &sc.e
	d := &sc.pd
	for _, id := range d.waits {
		e.u(sc.taskName(id))
	}
	for i := 0; i < len(d.pools); i += 3 {
		for _, h := range d.holds[d.pools[i]:d.pools[i+1]] {
			e.u(uint64(h.addr))
			e.byte1(uint8(h.kind))
			if h.kind == ipam.KindVIP {
				e.u(h.id)
			} else {
				e.u(sc.taskName(TaskID(h.id))) // 0: gone
			}
		}
		sc.qnodes = sc.qnodes[:0]
		for j := d.pools[i+1]; j < d.pools[i+2]; j++ {
			sc.qnodes = append(sc.qnodes, mcQuarNode{node: sc.mapNode(d.quar[j].node), raw: j})
		}
		slices.SortFunc(sc.qnodes, func(a, b mcQuarNode) int { return cmp.Compare(a.node, b.node) })
		width := 2 // address, holder
		if mcKeySeqs {
			width = 3
		}
		for _, qn := range sc.qnodes {
			q := d.quar[qn.raw]
			e.u(uint64(qn.node))
			e.u(uint64(q.hi - q.lo))
			for k := q.lo; k < q.hi; k += width {
				for _, v := range d.ents[k : k+width-1] {
					e.u(v)
				}
				e.u(sc.taskName(TaskID(d.ents[k+width-1])))
			}
		}
	}
}

// mcKeySeqs makes the key keep quarantine sequence numbers (relative to
// the node's AssignSeq) and entry order, as before the reduction: only for
// TestModelCheckQuarantineSeqsReduction.
var mcKeySeqs bool

// TestModelCheckQuarantineSeqsReduction: leaving sequence numbers out of
// the key loses no behaviour. Both keys explore every reachable state of
// small net bounds; every state the finer key reaches must have a class
// under the coarser key that the coarser exploration reached too (a merge
// of states with different futures would leave some unreached).
func TestModelCheckQuarantineSeqsReduction(t *testing.T) {
	b := mcBounds{nodes: 2, replicas: 2, retained: 1, events: 1, net: true, webOnly: true}
	defer func() { mcKeySeqs = false }()
	mcKeySeqs = true
	fine := mcReachable(t, b)
	mcKeySeqs = false
	coarse := mcReachable(t, b)
	covered := map[uint64]bool{}
	for _, s := range fine {
		k := mcKey(s.s, s.m)
		if _, ok := coarse[k]; !ok {
			t.Fatalf("a state reachable with sequence numbers in the key is not reached without them:\n%s", mcDump(s.s))
		}
		covered[k] = true
	}
	if len(covered) != len(coarse) {
		t.Fatalf("%d classes reached without sequence numbers, %d reachable", len(coarse), len(covered))
	}
	t.Logf("%d states with sequence numbers in the key, %d without", len(fine), len(coarse))
	if len(coarse) >= len(fine) {
		t.Fatal("no state was merged: the check checked nothing")
	}
}

type mcStateMeta struct {
	s *State
	m mcMeta
}

// mcReachable explores every state of b breadth first (states kept in
// memory: small bounds only), by key.
func mcReachable(t *testing.T, b mcBounds) map[uint64]mcStateMeta {
	c := &mcChecker{b: b, retention: b.retained + 1}
	init := mcInitial(b, c.retention)
	seen := map[uint64]mcStateMeta{mcKey(init, mcMeta{}): {init, mcMeta{}}}
	queue := []mcStateMeta{{init, mcMeta{}}}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, a := range mcActions(cur.s, cur.m, b, false) {
			after, err := c.apply(cur.s, a)
			if err != nil {
				t.Fatalf("illegal step %q: %v", a.desc(), err)
			}
			if after == nil {
				continue
			}
			m := a.metaAfter(cur.m)
			if k := mcKey(after, m); seen[k].s == nil {
				seen[k] = mcStateMeta{after, m}
				queue = append(queue, mcStateMeta{after, m})
			}
		}
	}
	return seen
}

// mcDump lists a state's tasks and nodes (for failure messages).
func mcDump(s *State) string {
	var sb strings.Builder
	for _, id := range s.TaskIDs() {
		t := s.tasks.get(id)
		fmt.Fprintf(&sb, "  %s v%d node=%d %s desired=%s\n", s.taskName(t), t.SpecVersion, t.Node, t.Status.State, t.Desired)
	}
	for _, nid := range s.NodeIDs() {
		fmt.Fprintf(&sb, "  n%d %s seq=%d\n", nid, s.nodes[nid].Status, s.nodes[nid].AssignSeq)
	}
	return sb.String()
}

// mcQuarantined reports whether any pool holds an address quarantined on
// node id (else a sync from it frees nothing and changes nothing).
func (s *State) mcQuarantined(id NodeID) bool {
	for _, p := range s.pools {
		if len(p.Quarantine(uint32(id))) > 0 {
			return true
		}
	}
	return false
}
