package statemachine

import (
	"bytes"
	"flag"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"shoal/ipam"
)

// The model checker explores every interleaving of component actions over the
// real Apply (with Config.ManualReactions, so orchestrator, allocator and
// reaper are separate steps), from the empty state, within bounds, and
// de-duplicates states by hash. At every state it checks the state
// invariants; at every step that the change was legal for the component that
// made it; and from every state that, once user actions and failures stop,
// progress reaches the desired state.

var (
	mcEvents       = flag.Int("mc.events", 1, "model checker: most event actions (update, node down, reject, exit) per behaviour")
	mcNetEvents    = flag.Int("mc.net-events", 0, "model checker with addresses and disconnects: most event actions per behaviour")
	mcManualEvents = flag.Int("mc.manual-events", 0, "model checker with separate reaction steps: most event actions per behaviour")
	mcKeepGoing    = flag.Bool("mc.keep-going", false, "model checker: after a liveness violation, go on exploring (to measure the space; the first violation is still reported)")
	mcMaxStates    = flag.Int("mc.max-states", 0, "model checker: stop after about this many states (0: no limit; for profiling, the run then proves nothing)")
)

type mcBounds struct {
	nodes    int
	replicas uint32 // the replicated service starts at this count and may scale to 1
	retained int    // terminated tasks kept per slot beside the live one
	events   int
	manual   bool // orchestrator, allocator and reaper as separate steps
	bug      mcBug
	// net puts the replicated service on a network of two task addresses
	// (plus its VIP) and gives it a disconnect window; nodes may then also
	// disconnect (an event), reconnect, be given up on, and sync.
	net bool
	// webOnly leaves the global service out (a self-test's smaller space).
	webOnly bool
}

// mcFar is "much later": a tick this long after the state's last entry
// fires every pending timer (restart holds, disconnect windows). Every
// other action happens at the last entry's time, so every pending timer
// was set at that time and time matters only relative to it (the key keeps
// nextDue relative to it). A tick at a fixed mcFar fired nothing once time
// had reached mcFar: a window opened after the first tick never closed.
const mcFar = int64(1) << 50

// mcLater is the time of an entry "much later" than s's last one.
func mcLater(s *State) int64 { return s.lastTime + mcFar }

// mcMeta is what the checker tracks beside the state: bounded budgets.
type mcMeta struct {
	events  uint8
	created uint8 // bit i: service i was created (each is created once)
}

type mcAction struct {
	// format and args describe the action (desc formats them only when
	// asked: formatting every action's description was a twentieth of
	// the checker's time).
	format string
	args   []any
	by     Component
	cmd    Command
	event  bool
	// progress: the action is one of fair progress (mcActions with
	// progressOnly lists exactly these, in the same order).
	progress bool
	meta     func(m *mcMeta)
	at       int64 // the entry's time; 0 means the checker's usual 1
}

// desc describes the action, as traces show it.
func (a mcAction) desc() string { return fmt.Sprintf(a.format, a.args...) }

// metaAfter is m after taking a: its event counted and its own change made.
func (a mcAction) metaAfter(m mcMeta) mcMeta {
	if a.event {
		m.events++
	}
	if a.meta != nil {
		a.meta(&m)
	}
	return m
}

type mcResult struct {
	states, transitions int
	violation           string // empty when none
	liveness            int    // liveness violations found (with -mc.keep-going)
}

// time is the entry's time of an action: the checker's usual 1, or later.
func (a mcAction) time() int64 {
	if a.at != 0 {
		return a.at
	}
	return 1
}

// mcClone decodes a state; the seeded bug is not part of the encoding, so
// it is set again on every copy.
func mcClone(canon []byte, bug mcBug) *State { return mcDecode(canon, bug, poolCodec{}) }

// decode decodes a state, its pools shared through the checker's codec.
func (c *mcChecker) decode(canon []byte) *State { return mcDecode(canon, c.b.bug, c.pools.codec()) }

// canonical is s.Canonical(), shared pools' encodings from the codec.
func (c *mcChecker) canonical(s *State) []byte { return s.canonicalWith(c.pools.codec()) }

func mcDecode(canon []byte, bug mcBug, pc poolCodec) *State {
	s, err := decodeCanonicalWith(canon, pc)
	if err != nil {
		panic(fmt.Sprintf("model checker: state does not decode: %v", err))
	}
	setSeededBug(&s.cfg, bug)
	return s
}

// apply applies one action to a copy of before and returns the new state
// (nil when Apply rejected the action), and the first illegal change the
// observer saw.
func (c *mcChecker) apply(before *State, a mcAction) (after *State, err error) {
	return c.applyOn(nil, before, a)
}

// applyOn is apply with the copy made in the space of a state wk has done
// with (wk nil: a new one).
func (c *mcChecker) applyOn(wk *mcWorker, before *State, a mcAction) (after *State, err error) {
	after = wk.clone(before)
	var stepErr *error
	out, batch := &Output{}, make([]Command, 1)
	if wk != nil {
		if wk.watcher == nil {
			wk.watcher = newMCWatcher(c.b.manual, c.retention)
		}
		stepErr = wk.watcher.watch(after, a)
		out, batch = &wk.out, wk.batch[:]
	} else {
		stepErr = mcWatch(after, a, c.b.manual, c.retention)
	}
	batch[0] = a.cmd
	after.Apply(batch, 0, a.time(), out)
	if *stepErr != nil {
		return nil, *stepErr
	}
	if err := mcScaleCheck(before, after); err != nil {
		return nil, err
	}
	if out.Results[0].Code != CodeOK {
		return nil, nil
	}
	after.observe = nil
	return after, nil
}

type mcChecker struct {
	b         mcBounds
	retention int
	init      []byte  // the initial state's encoding
	recs      []mcRec // every state found, in the order found
	// checked holds mcKey(s, mcMeta{}) of every state whose liveness
	// check passed, in chunks merged before (written between chunks).
	checked *mcSet
	pools   *mcPools
	claims  *mcClaims // the chunk being expanded's (mcClaims)
}

// mcWorker is what one worker keeps between the states it expands.
type mcWorker struct {
	memo *mcSet // states whose liveness walk passed
	buf  []byte // compression's scratch
	// used lists the states made while expanding the current state;
	// once it is expanded nothing refers to them, and they are free:
	// the next clones are made in their space (cloneReusing).
	used, free []*State
	watcher    *mcWatcher
	// space for the action lists and steps of expansions and of
	// liveness walks past their first step
	expansion, walk mcActBuf
	out             Output     // a step's (Apply resets it)
	batch           [1]Command // a step's
	// sound holds the decoded pools whose invariants hold (checkPool)
	sound map[*ipam.Pool]bool
}

// checkPool is (*ipam.Pool).CheckInvariants, remembered for the pools of
// the states the worker decodes: they are the codec's shared pools
// (mcPools), which no state changes in place (poolW copies them first).
// The map holds the pools, so a pointer is not reused while it is a key.
func (w *mcWorker) checkPool(p *ipam.Pool) error {
	if w.sound[p] {
		return nil
	}
	if err := p.CheckInvariants(); err != nil {
		return err
	}
	if w.sound == nil || len(w.sound) >= mcPoolsCap {
		w.sound = map[*ipam.Pool]bool{}
	}
	w.sound[p] = true
	return nil
}

// clone is before.Clone(), in the space of a free state if there is one.
func (w *mcWorker) clone(before *State) *State {
	if w == nil {
		return before.Clone()
	}
	var old *State
	if n := len(w.free); n > 0 {
		old, w.free = w.free[n-1], w.free[:n-1]
	}
	c := before.cloneReusing(old)
	w.used = append(w.used, c)
	return c
}

// recycle frees every state made since the last recycle, and done (a
// state decoded for the expansion). No state of an expansion may be
// referred to after it.
func (w *mcWorker) recycle(done *State) {
	w.free = append(append(w.free, w.used...), done)
	clear(w.used)
	w.used = w.used[:0]
	if len(w.free) > mcFreeCap {
		clear(w.free[mcFreeCap:])
		w.free = w.free[:mcFreeCap]
	}
}

// mcFreeCap bounds a worker's free states (a liveness walk may make
// hundreds).
const mcFreeCap = 64

// compress returns canon s2-compressed, in a slice of its own size.
func (w *mcWorker) compress(canon []byte) []byte {
	w.buf = s2.Encode(w.buf[:cap(w.buf)], canon)
	return bytes.Clone(w.buf)
}

// mcWorkers is how many goroutines expand states (the machine has 2 cores).
const mcWorkers = 2

// mcSucc is a successor found while expanding a state.
type mcSucc struct {
	rec   mcRec
	canon []byte
	key   uint64
}

// mcMemoCap bounds each worker's liveness memo (a cache: clearing it only
// costs time).
const mcMemoCap = 1 << 22

// mcInitial is the state every behaviour starts from: the nodes, and in
// net mode the network.
func mcInitial(b mcBounds, retention int) *State {
	cfg := Config{Group: 1, HistoryRetention: retention, ManualReactions: b.manual}
	setSeededBug(&cfg, b.bug)
	init := New(cfg)
	var out Output
	for i := 1; i <= b.nodes; i++ {
		init.Apply([]Command{{Kind: CmdUpsertNode, NodeSpec: &Node{ID: NodeID(i), Name: fmt.Sprintf("n%d", i)}}}, 0, 1, &out)
	}
	if b.net {
		// 10.0.0.2-10.0.0.3 usable beside the VIP's: .1 is the gateway, .4-.6 reserved.
		init.Apply([]Command{{Kind: CmdCreateNetwork, NetworkSpec: &Network{ID: 1, Name: "net", Subnet: "10.0.0.0/29", Reserved: []string{"10.0.0.5-10.0.0.6"}}}}, 0, 1, &out)
		if out.Results[0].Code != CodeOK {
			panic(out.Results[0].Err())
		}
	}
	return init
}

func runModelCheck(b mcBounds) mcResult {
	start := time.Now()
	// The checker allocates at a high rate and keeps little that the
	// collector must scan (fingerprints and queued states are a few large
	// pointer-free arrays): collecting less often saves a third of the
	// time, and the memory limit keeps a large run within its bound.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(mcMemoryLimit))
	c := &mcChecker{b: b, retention: b.retained + 1, checked: newMCSet(1 << 16), pools: newMCPools()}
	init := mcInitial(b, c.retention)
	c.init = init.Canonical()
	c.recs = append(c.recs, mcRec{parent: -1})
	seen := newMCSet(1 << 16)
	seen.add(mcKey(init, mcMeta{}))
	frontier := &mcQueue{}
	frontier.push(0, mcCompress(c.init))
	workers := make([]*mcWorker, mcWorkers)
	for w := range workers {
		workers[w] = &mcWorker{memo: newMCSet(1 << 10)}
	}
	c.claims = newMCClaims(mcChunk * 8)
	res := mcResult{}
	// Breadth first, a level at a time. At every state: the invariants,
	// and that fair progress from it reaches the desired state (liveness);
	// at every step, legality. Workers expand disjoint parts of a level;
	// successors are merged in state order, so runs are repeatable.
	stop := false
	for frontier.len() > 0 && !stop && (*mcMaxStates == 0 || len(c.recs) < *mcMaxStates) {
		next := &mcQueue{}
		// A level is expanded a chunk at a time and merged after each, so
		// only a chunk's successors (duplicates included) are held at once.
		for lo := 0; lo < frontier.len() && !stop; lo += mcChunk {
			hi := min(lo+mcChunk, frontier.len())
			frontier.load(lo, hi)
			chunk := make([]mcFront, hi-lo)
			for i := range chunk {
				chunk[i] = frontier.at(lo + i)
			}
			stop = c.expandChunk(chunk, seen, workers, &res, next)
			frontier.release(hi)
		}
		frontier.release(frontier.len()) // also after a stop
		if testing.Verbose() && len(c.recs) > 100000 {
			fmt.Printf("  progress: %d states, %d to expand (%d MiB compressed), %.0fs\n",
				len(c.recs), next.len(), next.bytes>>20, time.Since(start).Seconds())
		}
		frontier = next
	}
	frontier.release(frontier.len())
	res.states = len(c.recs)
	return res
}

// mcMemoryLimit is the heap size at which the collector works harder (the
// runs must stay within 8 GB).
const mcMemoryLimit = 7 << 30

// mcChunk is how many states are expanded between two merges.
const mcChunk = 1 << 14

// expandChunk expands chunk on the workers, then merges the successors not
// seen before into next, in state order (runs are repeatable). It reports
// whether to stop: a violation (past a liveness one, with -mc.keep-going,
// it goes on).
func (c *mcChecker) expandChunk(chunk []mcFront, seen *mcSet, workers []*mcWorker, res *mcResult, next *mcQueue) bool {
	c.claims.reset(len(chunk) * 8)
	succs := make([][]mcSucc, len(chunk))
	viol := make([]string, len(chunk))
	checked := make([]uint64, len(chunk))
	trans := make([]int, mcWorkers)
	// Each worker takes the next state not taken: on a shared machine one
	// worker may be held up for a while, and a fixed share would leave
	// the other waiting at the end of the chunk.
	var wg sync.WaitGroup
	var taken atomic.Int64
	for w := range mcWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				q := int(taken.Add(1) - 1)
				if q >= len(chunk) {
					return
				}
				if workers[w].memo.n > mcMemoCap {
					workers[w].memo = newMCSet(1 << 10)
				}
				succs[q], trans[w], viol[q], checked[q] = c.expand(chunk[q], seen, workers[w], trans[w])
				chunk[q].canon = nil
			}
		}()
	}
	wg.Wait()
	for _, t := range trans {
		res.transitions += t
	}
	for i := range succs {
		if viol[i] == "" {
			c.checked.add(checked[i])
		}
		if viol[i] != "" {
			if res.violation == "" {
				res.violation = viol[i]
			}
			if !*mcKeepGoing || !strings.HasPrefix(viol[i], "liveness") {
				return true
			}
			res.liveness++
		}
		for _, sc := range succs[i] {
			if !seen.add(sc.key) {
				continue
			}
			next.push(int32(len(c.recs)), sc.canon)
			c.recs = append(c.recs, sc.rec)
		}
	}
	return false
}

// expand checks a state (its invariants, the legality of every step from
// it, then that progress from it reaches the desired state) and returns its
// successors, and its key for c.checked.
func (c *mcChecker) expand(f mcFront, seen *mcSet, wk *mcWorker, transitions int) ([]mcSucc, int, string, uint64) {
	meta := c.recs[f.idx].meta
	canon, err := s2.Decode(nil, f.canon)
	if err != nil {
		panic(fmt.Sprintf("model checker: frontier entry does not decompress: %v", err))
	}
	before := c.decode(canon)
	if err := before.checkInvariants(wk.checkPool); err != nil {
		return nil, transitions, fmt.Sprintf("invariant broken: %v\ntrace:\n%s", err, c.trace(f.idx, "")), 0
	}
	// A successor is encoded only if its key is new: seen is not written
	// while a level is expanded, so the workers may read it.
	self := mcStateKey(before)
	var out []mcSucc
	acts := mcActionsIn(&wk.expansion, before, meta, c.b, false)
	steps := wk.expansion.stepsFor(len(acts))
	for i, a := range acts {
		after, err := c.applyOn(wk, before, a)
		if err != nil {
			return nil, transitions, fmt.Sprintf("illegal step: %v\ntrace:\n%s", err, c.trace(f.idx, a.desc())), 0
		}
		steps[i] = mcStep{act: a, after: after, applied: true}
		if after == nil {
			continue
		}
		m := a.metaAfter(meta)
		sk := mcStateKey(after)
		steps[i].sk = sk
		if sk == self {
			continue // changed nothing (up to the key's abstractions)
		}
		base := mcBaseOf(sk, m)
		key := mcWithEvents(base, m.events)
		transitions++
		if seen.has(key) || mcSubsumed(seen, base, m) || !c.claims.claim(key, int64(f.idx)) {
			continue // seen, or an earlier state of the chunk reaches it too
		}
		steps[i].canon = c.canonical(after)
		out = append(out, mcSucc{rec: mcRec{parent: f.idx, act: uint16(i), meta: m}, canon: wk.compress(steps[i].canon), key: key})
	}
	err = c.checkProgress(before, canon, self, wk, steps)
	wk.recycle(before)
	if err != nil {
		return out, transitions, fmt.Sprintf("liveness: %v\ntrace:\n%s", err, c.trace(f.idx, "")), 0
	}
	return out, transitions, "", mcWithEvents(mcBaseOf(self, mcMeta{}), 0)
}

func mcReport(t *testing.T, name string, b mcBounds) {
	start := time.Now()
	res := runModelCheck(b)
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru) // Maxrss: KiB on Linux
	fmt.Printf("%s: nodes=%d services=2 replicas=%d retained=%d events=%d states=%d transitions=%d seconds=%.1f peak-rss-mib=%d\n",
		name, b.nodes, b.replicas, b.retained, b.events, res.states, res.transitions,
		time.Since(start).Seconds(), ru.Maxrss/1024)
	if res.liveness > 0 {
		fmt.Printf("%s: %d states break liveness; the first found:\n", name, res.liveness)
	}
	if res.violation != "" {
		t.Fatal(res.violation)
	}
}

// TestModelCheck: reactions run inside Apply, as in production; every
// interleaving of user, scheduler, agent and node-monitor actions.
func TestModelCheck(t *testing.T) {
	mcReport(t, "modelcheck", mcBounds{nodes: 2, replicas: 2, retained: 1, events: *mcEvents})
}

// TestModelCheckManualReactions: the orchestrator, allocator and reaper are
// separate steps too, so their every interleaving with the rest is explored
// (smaller bounds: the state space is far larger).
func TestModelCheckManualReactions(t *testing.T) {
	mcReport(t, "modelcheck-manual", mcBounds{nodes: 2, replicas: 2, retained: 1, events: *mcManualEvents, manual: true})
}

// TestModelCheckAddressesDisconnects adds a pool of two task addresses
// (invariant 6 at every state: an address is never attached to two tasks
// that may both still hold it) and node disconnects, reconnects and syncs.
func TestModelCheckAddressesDisconnects(t *testing.T) {
	mcReport(t, "modelcheck-net", mcBounds{nodes: 2, replicas: 2, retained: 1, events: *mcNetEvents, net: true})
}
