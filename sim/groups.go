package sim

import (
	"context"
	"sort"
	"sync"
	"time"

	"shoal/engine/duty"
	"shoal/route"
	"shoal/statemachine"
)

// groups is the replicated groups: duty.Memory is the log and the leader's
// applied state (the duties run over it); each manager replica holds its
// own statemachine.State per group and applies the log's entries at its
// own pace. A replica applies each entry of a group a while after it was
// committed, that while (its lag there) chosen by the seed (the leader
// replica never lags); a call a manager serves reads its
// replica's state, catching it up first only where the call waits for it
// (a linearizable read, or its own commit).
type groups struct {
	mem *duty.Memory
	g   []*group // per group (0 = the cluster group)
	// onApply is called after replica r applied an entry, under the
	// group's lock (the replica's change feed).
	onApply func(r, g int, index uint64, effects []statemachine.Effect)
}

// group is one group's log and its replicas' states.
type group struct {
	mu   sync.Mutex
	log  []duty.Entry // entry i has index i+1
	reps []*statemachine.State
	lag  []time.Duration // how long after its commit each replica applies an entry
	out  statemachine.Output
	// changes are the stream replica's applied effects not yet rendered.
	changes []change
}

// change is one effect the event stream's replica applied.
type change struct {
	index uint64
	eff   statemachine.Effect
}

func newGroups(mem *duty.Memory, replicas int, configure func(*statemachine.Config)) *groups {
	gs := &groups{mem: mem}
	for g := 0; g <= mem.Groups(); g++ {
		gr := &group{lag: make([]time.Duration, replicas)}
		for range replicas {
			cfg := statemachine.Config{Group: uint16(g), Groups: mem.Groups()}
			if configure != nil {
				configure(&cfg)
			}
			gr.reps = append(gr.reps, statemachine.New(cfg))
		}
		gs.g = append(gs.g, gr)
	}
	mem.OnEntry(func(e duty.Entry) {
		gr := gs.g[e.Group]
		gr.mu.Lock()
		gr.log = append(gr.log, e)
		gr.mu.Unlock()
	})
	return gs
}

// catchUp applies group g's log on replica r up to index upTo (at most the
// log's end); stream says whether r is the event stream's replica.
func (gs *groups) catchUp(r, g int, upTo uint64, stream bool) {
	gr := gs.g[g]
	gr.mu.Lock()
	defer gr.mu.Unlock()
	gs.catchUpLocked(gr, r, g, upTo, stream)
}

func (gs *groups) catchUpLocked(gr *group, r, g int, upTo uint64, stream bool) {
	st := gr.reps[r]
	upTo = min(upTo, uint64(len(gr.log)))
	for i := st.LastIndex(); i < upTo; i++ {
		e := &gr.log[i]
		st.Apply(e.Cmds, e.Index, e.At, &gr.out)
		if gs.onApply != nil {
			gs.onApply(r, g, e.Index, gr.out.Effects)
		}
		if stream {
			for _, eff := range gr.out.Effects {
				gr.changes = append(gr.changes, change{e.Index, eff})
			}
		}
	}
}

// end returns group g's last index.
func (gs *groups) end(g int) uint64 {
	gr := gs.g[g]
	gr.mu.Lock()
	defer gr.mu.Unlock()
	return uint64(len(gr.log))
}

// settle has every replica apply the entries its lag lets it have
// applied by now (the leader all of them).
func (gs *groups) settle(leader, stream int, now time.Time) {
	for g, gr := range gs.g {
		gr.mu.Lock()
		end := uint64(len(gr.log))
		for r, st := range gr.reps {
			from := st.LastIndex()
			if from >= end {
				continue
			}
			upTo := end
			if r != leader {
				// Entries are committed in time order: the first one
				// committed after by, and everything past it, waits.
				by := now.Add(-gr.lag[r]).UnixNano()
				upTo = from + uint64(sort.Search(int(end-from), func(i int) bool { return gr.log[from+uint64(i)].At > by }))
			}
			gs.catchUpLocked(gr, r, g, upTo, r == stream)
		}
		gr.mu.Unlock()
	}
}

// read runs fn over replica r's state of group g.
func (gs *groups) read(r, g int, fn func(*statemachine.State)) {
	gr := gs.g[g]
	gr.mu.Lock()
	defer gr.mu.Unlock()
	fn(gr.reps[r])
}

// takeChanges returns and clears group g's unrendered stream changes.
func (gs *groups) takeChanges(g int) []change {
	gr := gs.g[g]
	gr.mu.Lock()
	defer gr.mu.Unlock()
	out := gr.changes
	gr.changes = nil
	return out
}

// restore restarts replica r from a snapshot of its own state (its
// canonical encoding, what a snapshot compresses, decoded again), then it
// catches up from the log as before. A restored state keeps no test seam.
func (gs *groups) restore(r int) error {
	for _, gr := range gs.g {
		gr.mu.Lock()
		s, err := statemachine.FromCanonical(gr.reps[r].Canonical())
		if err == nil {
			gr.reps[r] = s
		}
		gr.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// view is the groups as one manager replica serves a call: its local
// reads are replica r's state; a linearizable read, and a commit it
// waits for, first catch r up. It is what the control package needs of
// the cluster (control.Cluster).
type view struct {
	w *World
	r int
}

func (v view) Groups() int { return v.w.mem.Groups() }

func (v view) checkGroup(g int) error {
	if g < 0 || g > v.Groups() {
		return route.ErrNoGroup
	}
	return nil
}

// catchUp applies everything committed in group g on r.
func (v view) catchUp(g int) { v.w.gs.catchUp(v.r, g, v.w.gs.end(g), v.r == v.w.stream) }

func (v view) ReadLocal(g int, fn func(*statemachine.State)) error {
	if err := v.checkGroup(g); err != nil {
		return err
	}
	v.w.gs.read(v.r, g, fn)
	return nil
}

func (v view) Read(ctx context.Context, g int, fn func(*statemachine.State)) error {
	if err := v.checkGroup(g); err != nil {
		return err
	}
	v.catchUp(g)
	v.w.gs.read(v.r, g, fn)
	return nil
}

func (v view) SubmitToGroup(ctx context.Context, g int, cmd statemachine.Command) (statemachine.Result, error) {
	res, err := v.w.mem.SubmitToGroup(ctx, g, cmd)
	if v.checkGroup(g) == nil {
		v.catchUp(g)
	}
	return res, err
}

func (v view) SubmitMany(ctx context.Context, cmds []statemachine.Command) []route.Outcome {
	out := v.w.mem.SubmitMany(ctx, cmds)
	for g := range v.w.gs.g {
		v.catchUp(g)
	}
	return out
}

// Submit and SubmitBeforeFanout: duty.Memory delivers a node's creation
// to the service groups before it returns, so both are one SubmitMany.
func (v view) Submit(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error) {
	o := v.SubmitMany(ctx, []statemachine.Command{cmd})[0]
	if o.Failed != nil {
		return o.Result, o.Failed
	}
	return o.Result, o.Result.Err()
}

func (v view) SubmitBeforeFanout(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error) {
	return v.Submit(ctx, cmd)
}
