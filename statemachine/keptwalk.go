package statemachine

import (
	"container/heap"
	"fmt"
	"slices"
)

// The kept rolling-update walk. stepUpdate runs at every reconcile of a
// service under update, and at every tick while one is; walking every slot
// each time made every status report of one of a 1,000-slot service's
// tasks cost a walk of its 1,000 slots (13-25 % of a replica in a churn of
// rolling updates). The service keeps each slot's part of the walk
// (slotWalk) and their sums, and a pass looks again only at
//
//   - the slots whose tasks changed since (touchSlot, called wherever a
//     task's state, desired state, stop reason, node, history or slot
//     changes), and
//   - the slots whose time came: a slot's part holds until the earliest
//     time one of its time tests flips, and each such time is a due time
//     the walk notes, kept in a heap.
//
// Anything else the walk reads makes the next pass walk every slot again:
// the service's spec version, update configuration or ModifyIndex moved, a
// node was added, removed or changed status (s.nodeGen), or time went
// back. A state built with walkAll walks every slot at every pass (the
// reference the property test compares with).

// updateWalk is a service's kept walk.
type updateWalk struct {
	gen     uint64 // 0: nothing kept; slots' parts of other generations are void
	version uint32
	modify  uint64
	nodes   uint64
	cfg     UpdateConfig
	at      int64 // s.now at the last pass

	inflight, outdated, unsettled int
	noteNow                       int // slots that note now + delay
	// olds are the slots holding a live task of an older spec version,
	// ascending (withOutdated).
	olds  []uint32
	stale []uint32
	until dueSlots // by slotWalk.until
	notes dueSlots // by slotWalk.note
	// parts are the slots' parts, by slot number: only a service under
	// update has them, so a slot does not carry room for one (40 of its
	// 72 bytes, a slot per task).
	parts map[uint32]slotWalk
}

// dueSlot names a slot's part by one of its times; an entry whose slot's
// part changed since is void and dropped when met.
type dueSlot struct {
	at   int64
	slot uint32
}

type dueSlots []dueSlot

func (h dueSlots) Len() int           { return len(h) }
func (h dueSlots) Less(i, j int) bool { return h[i].at < h[j].at }
func (h dueSlots) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueSlots) Push(x any)        { *h = append(*h, x.(dueSlot)) }
func (h *dueSlots) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// touchSlot notes that a task of slot n of svc changed: its part of the
// kept walk is taken out of the sums and looked at again at the next pass.
func (s *State) touchSlot(svc *Service, n uint32) {
	if svc == nil || svc.walk.gen == 0 {
		return
	}
	if !svc.Update.active() {
		// Done or paused: an update starts again only with a new spec
		// version or ModifyIndex, which walks afresh.
		svc.walk = updateWalk{}
		return
	}
	if sl := svc.slots.get(n); sl != nil {
		svc.walk.drop(n)
	}
}

// touchTask is touchSlot for t's slot.
func (s *State) touchTask(t *Task) {
	s.touchSlot(s.services[t.Service], t.Slot)
}

// drop takes slot n's part out of the sums (a slot new to the walk has
// none) and lists it stale.
func (w *updateWalk) drop(n uint32) {
	p := w.parts[n]
	if p.gen == w.gen {
		if p.stale {
			return
		}
		w.inflight -= int(p.inflight)
		w.unsettled -= int(p.unsettled)
		if p.outdated {
			w.outdated--
		}
		if p.noteNow {
			w.noteNow--
		}
		if p.old {
			if i, ok := slices.BinarySearch(w.olds, n); ok {
				w.olds = slices.Delete(w.olds, i, i+1)
			}
		}
	}
	w.setPart(n, slotWalk{gen: w.gen, stale: true})
	w.stale = append(w.stale, n)
}

// add counts slot n's fresh part p in the sums and its times in the heaps.
func (w *updateWalk) add(n uint32, p slotWalk) {
	p.gen = w.gen
	w.setPart(n, p)
	w.inflight += int(p.inflight)
	w.unsettled += int(p.unsettled)
	if p.outdated {
		w.outdated++
	}
	if p.noteNow {
		w.noteNow++
	}
	if p.old {
		if i, ok := slices.BinarySearch(w.olds, n); !ok {
			w.olds = slices.Insert(w.olds, i, n)
		}
	}
	if p.until != 0 {
		heap.Push(&w.until, dueSlot{p.until, n})
	}
	if p.note != 0 {
		heap.Push(&w.notes, dueSlot{p.note, n})
	}
}

// setPart sets slot n's part.
func (w *updateWalk) setPart(n uint32, p slotWalk) {
	if w.parts == nil {
		w.parts = make(map[uint32]slotWalk)
	}
	w.parts[n] = p
}

// dropSlot forgets the part of slot n, which its service no longer has: a
// slot of that number made later is new to the walk.
func (w *updateWalk) dropSlot(n uint32) { delete(w.parts, n) }

// keptWalk returns what walkUpdate would, and notes the same due times,
// looking only at what changed since the last pass.
func (s *State) keptWalk(svc *Service, u UpdateConfig) (inflight, outdated, unsettled int) {
	w := &svc.walk
	if w.gen == 0 || w.version != svc.SpecVersion || w.modify != svc.ModifyIndex || w.nodes != s.nodeGen ||
		w.cfg != u || s.now < w.at || len(w.until)+len(w.notes) > 4*svc.slots.len()+64 {
		s.rebuildWalk(svc, u)
	} else {
		for _, n := range w.stale {
			if sl := svc.slots.get(n); sl != nil && w.parts[n].stale {
				w.add(n, s.walkSlot(svc, sl, u))
			}
		}
		w.stale = w.stale[:0]
		for len(w.until) > 0 && w.until[0].at <= s.now {
			e := heap.Pop(&w.until).(dueSlot)
			sl := svc.slots.get(e.slot)
			if p := w.parts[e.slot]; sl == nil || p.gen != w.gen || p.stale || p.until != e.at {
				continue // void
			}
			w.drop(e.slot)
			w.add(e.slot, s.walkSlot(svc, sl, u))
			w.stale = w.stale[:0]
		}
	}
	w.at = s.now
	for len(w.notes) > 0 {
		e := w.notes[0]
		if p := w.parts[e.slot]; svc.slots.get(e.slot) != nil && p.gen == w.gen && !p.stale && p.note == e.at {
			s.noteDue(e.at)
			break
		}
		heap.Pop(&w.notes) // void
	}
	if w.noteNow > 0 {
		s.noteDue(s.now + u.Delay)
	}
	return w.inflight, w.outdated, w.unsettled
}

// rebuildWalk walks every slot of svc into a fresh kept walk.
func (s *State) rebuildWalk(svc *Service, u UpdateConfig) {
	w := &svc.walk
	*w = updateWalk{gen: w.gen + 1, version: svc.SpecVersion, modify: svc.ModifyIndex, nodes: s.nodeGen, cfg: u,
		stale: w.stale[:0], until: w.until[:0], notes: w.notes[:0], olds: w.olds[:0], parts: w.parts}
	clear(w.parts)
	for _, n := range svc.slotKeys() {
		w.add(n, s.walkSlot(svc, svc.slots.get(n), u))
	}
}

// checkKeptWalks compares the kept walk of every service under update
// with its slots (an invariant: CheckInvariants): every slot is in the walk or listed stale, the parts
// not stale add up to the sums, and each part whose time has not come
// equals a fresh walk of its slot now.
func (s *State) checkKeptWalks() error {
	for _, id := range sortedKeys(s.updating) {
		svc := s.updating[id]
		w := &svc.walk
		if w.gen == 0 || w.version != svc.SpecVersion || w.modify != svc.ModifyIndex || w.nodes != s.nodeGen {
			continue // walked afresh at the next pass
		}
		u := svc.updateConfig()
		var inflight, outdated, unsettled, noteNow int
		var olds []uint32
		for n := range w.parts {
			if svc.slots.get(n) == nil {
				return fmt.Errorf("service %d: the kept walk holds a part of slot %d, which it does not have", id, n)
			}
		}
		for _, n := range svc.slotKeys() {
			p := w.parts[n]
			if p.gen != w.gen {
				return fmt.Errorf("service %d: slot %d is neither in the kept walk nor listed stale", id, n)
			}
			if p.stale {
				continue
			}
			if p.old {
				olds = append(olds, n)
			}
			inflight, unsettled = inflight+int(p.inflight), unsettled+int(p.unsettled)
			if p.outdated {
				outdated++
			}
			if p.noteNow {
				noteNow++
			}
			if p.until != 0 && p.until <= s.now {
				continue // its time came: looked at again at the next pass
			}
			if fresh := s.walkSlot(svc, svc.slots.get(n), u); fresh.inflight != p.inflight || fresh.unsettled != p.unsettled ||
				fresh.outdated != p.outdated || fresh.old != p.old || fresh.noteNow != p.noteNow || fresh.note != p.note || fresh.until != p.until {
				return fmt.Errorf("service %d slot %d: kept part %+v, a walk of the slot now %+v", id, n, p, fresh)
			}
		}
		if !slices.Equal(olds, w.olds) {
			return fmt.Errorf("service %d: kept walk lists slots %v holding older tasks; its parts say %v", id, w.olds, olds)
		}
		if inflight != w.inflight || outdated != w.outdated || unsettled != w.unsettled || noteNow != w.noteNow {
			return fmt.Errorf("service %d: kept walk sums %d in flight, %d outdated, %d unsettled, %d noting now; its parts add up to %d, %d, %d, %d",
				id, w.inflight, w.outdated, w.unsettled, w.noteNow, inflight, outdated, unsettled, noteNow)
		}
	}
	return nil
}
