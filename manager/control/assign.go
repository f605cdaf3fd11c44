package control

import (
	"cmp"
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"shoal/cluster"
	"shoal/internal/clock"
	"shoal/route"
	"shoal/statemachine"
	"shoal/wire"
)

// Reader is what the assignment stream reads of the replicated groups
// (the duty.Cluster seam has these methods; so does the engine).
type Reader interface {
	// Groups returns the number of service groups (1..Groups()).
	Groups() int
	// ReadLocal runs fn over the group's state as this replica applied it
	// so far (possibly stale). fn runs under the group's read lock, which
	// the apply holds for writing while it feeds the Feed (feed.go).
	ReadLocal(group int, fn func(*statemachine.State)) error
	// Read runs fn over the group's state once everything committed before
	// the call is applied here (linearizable; it needs a quorum).
	Read(ctx context.Context, group int, fn func(*statemachine.State)) error
}

// Leaders is what the agent protocol needs to know of the groups' leaders
// (the engine implements it): Leader returns a group's leader (ok is false
// while none is known); LeaderNotice returns the leader as this replica
// was notified of it (0: none) and a channel closed at the next change;
// Contact says whether this replica is in contact with the group's quorum.
type Leaders interface {
	Leader(group int) (replicaID uint64, ok bool)
	LeaderNotice(group int) (leader uint64, next <-chan struct{})
	Contact(group int) cluster.Contact
}

// streamConfig configures a Stream.
type streamConfig struct {
	// Reads reads the groups' states. Required.
	Reads Reader
	// Leaders names the cluster group's leader and says whether this
	// replica is in contact with its quorum. Required.
	Leaders Leaders
	// Feed follows what this replica applies; its OnApply must be wired
	// into the cluster's apply hook. Required.
	Feed *Feed
	// Clock times the long polls. Default: the wall clock.
	Clock clock.Clock
	// Logf gets a line when this replica loses or regains contact with
	// the cluster group's quorum. Default: discard.
	Logf func(format string, args ...any)
	// Sequential: see AgentsConfig.Sequential.
	Sequential bool
	// Logs: see AgentsConfig.Logs.
	Logs *LogBroker
	// bugs: the seeded bugs planted (AgentsConfig.seams).
	bugs seams
}

// Stream is the assignment stream of one manager replica (DESIGN.md, "The
// task model"): each agent's long poll answered with its node's
// assignments, from this replica's state and the Feed's per-node journal.
// Safe for concurrent use.
type Stream struct {
	reads    Reader
	leaders  Leaders
	feed     *Feed
	clock    clock.Clock
	logf     func(string, ...any)
	seq      bool
	logs     *LogBroker
	bugs     seams
	sessions sessionTable
	quorum   quorumWatch
	parked   atomic.Int64
	frames   struct{ complete, incremental atomic.Uint64 }
}

// newStream returns the assignment stream over cfg's groups and feed.
func newStream(cfg streamConfig) *Stream {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Logs == nil {
		cfg.Logs = NewLogBroker(LogConfig{})
	}
	s := &Stream{reads: cfg.Reads, leaders: cfg.Leaders, feed: cfg.Feed, clock: cfg.Clock, logf: cfg.Logf, seq: cfg.Sequential,
		logs: cfg.Logs, bugs: cfg.bugs}
	s.quorum.lost = make(chan struct{})
	return s
}

// maxAssignWait caps an assignments long poll.
const maxAssignWait = 5 * time.Minute

// completeWait bounds how long a COMPLETE frame waits for this replica to
// catch up with the cluster.
const completeWait = 10 * time.Second

// StreamStats counts what a Stream did: the frames it answered with
// (COMPLETE, and INCREMENTAL with changes), the long polls waiting now,
// and the session records it holds.
type StreamStats struct {
	Complete, Incremental uint64
	Parked                int64
	Sessions              int
}

// Stats returns the stream's counts (none for a nil Stream).
func (s *Stream) Stats() StreamStats {
	if s == nil {
		return StreamStats{}
	}
	return StreamStats{Complete: s.frames.complete.Load(), Incremental: s.frames.incremental.Load(),
		Parked: s.parked.Load(), Sessions: s.sessions.size()}
}

// Open records that session opened here for node: the node's older
// session record here goes.
func (s *Stream) Open(session uint64, node statemachine.NodeID) { s.sessions.open(session, node) }

// Assignments answers an agent's poll (req.NodeID is the caller, checked
// by the caller) with one whole frame (the caller splits it under the
// frame size cap):
//
//   - no cursor: a COMPLETE, every task on the node, rendered only once
//     this replica applied everything committed before the request;
//   - a cursor the node's journal reaches back to: an INCREMENTAL of the
//     node's changes since the cursor, once there are any; a cursor it
//     does not reach: a COMPLETE marked Resync;
//   - nothing new by the request's wait (capped at maxAssignWait), a
//     change of the cluster group's leader to one this replica can name,
//     a log subscription's notice for the node, or ctx's end: an
//     INCREMENTAL without changes, naming the leader, from the same
//     cursor.
//
// An INCREMENTAL hands the node the log subscriptions' notices it was not
// handed yet (LogBroker).
//
// Each spec goes to a session once per service (by ID) and version, unless the
// agent asks from another cursor than the last answer gave it (that
// answer was lost) or resyncs: the session's specs are then sent again.
// Without contact with the cluster group's quorum a poll with a cursor is
// refused (no_quorum, naming the leader), and a waiting one ends so.
func (s *Stream) Assignments(ctx context.Context, req *wire.AssignmentsRequest) (*wire.Assignments, error) {
	ss := s.sessions.get(req.SessionID, req.NodeID)
	if len(req.Cursor) == 0 {
		return s.complete(ss, req.NodeID, false)
	}
	lost, ok := s.quorumState()
	if !ok {
		return nil, s.noQuorum()
	}
	started, _ := s.leaders.LeaderNotice(route.ClusterGroup)
	wait := min(time.Duration(max(req.Wait, 0)), maxAssignWait)
	var timeout <-chan time.Time
	var room [64]bool
	changed := room[:0]
	for {
		var pending bool
		var wake <-chan struct{}
		pending, wake, changed = s.feed.nodePending(req.NodeID, req.Cursor, changed)
		if pending {
			break
		}
		// The poll is also answered when the cluster's leader changes to
		// one this manager can name, so that the agent's next heartbeat
		// goes straight to it: a fleet whose leader died otherwise tried
		// the dead one first (or the same address restarted, still
		// catching up), each agent at its next beat.
		leader, notice := s.leaders.LeaderNotice(route.ClusterGroup)
		// A log subscription for the node is handed over at once (logs.go).
		logWake := s.logs.NoticeWake(req.NodeID)
		logs := s.logs.HasNotices(req.NodeID, s.clock.Now())
		if !logs && (leader == 0 || leader == started) && wait > 0 {
			if timeout == nil {
				// The poll parks: its timer is set now, not before the
				// first look (most polls in a ramp find changes at once).
				timer := s.clock.NewTimer(wait)
				defer timer.Stop()
				timeout = timer.C()
				s.parked.Add(1)
				defer s.parked.Add(-1)
			}
			select {
			case <-wake:
				continue
			case <-logWake:
				continue
			case <-notice:
				continue
			case <-lost:
				return nil, s.noQuorum()
			case <-timeout:
			case <-ctx.Done():
			}
		}
		// Nothing changed (or only the leader): the agent asks again from
		// the same place, told the leader as known now.
		ss.mu.Lock()
		ss.renderingLocked(req.Cursor) // an answer lost before this one took its specs along
		ss.give(req.Cursor)
		ss.mu.Unlock()
		now, _ := s.leaders.LeaderNotice(route.ClusterGroup)
		if now == 0 && leader != 0 && leader != started {
			// The change that answered the poll, though the leadership
			// moves on already (a hand-over under way): naming nobody
			// sent the agent's next heartbeat to the old leader.
			now = leader
		}
		a := newFrame(len(req.Cursor) - 1)
		a.AppliesTo, a.Leader, a.Logs = req.Cursor, s.managerAddr(now), s.logs.TakeNotices(req.NodeID, s.clock.Now())
		copy(a.ResultsIn, req.Cursor)
		a.Seqs = a.Seqs[:0] // none moved (kept empty, not nil, for Release)
		return a, nil
	}
	// The scratch is taken only now: thousands of parked polls would each
	// hold one.
	sc := getScratch()
	defer scratchPool.Put(sc)
	return s.incremental(ss, req.NodeID, req.Cursor, sc)
}

// scratch is the room one answer works in, reused from answer to answer
// (nothing of it stays in a frame).
type scratch struct {
	inc     incRead
	read    func(*statemachine.State) // sc.readChanges, made once per scratch
	changed []bool
	quiet   []uint64
	es      []jentry
	seen    map[statemachine.TaskID]bool
	r       render
}

var scratchPool = sync.Pool{New: func() any {
	sc := &scratch{seen: map[statemachine.TaskID]bool{}}
	sc.read = sc.readChanges
	return sc
}}

func getScratch() *scratch {
	sc := scratchPool.Get().(*scratch)
	sc.r.reset()
	return sc
}

// render renders a frame's tasks (assignment): the addresses of all its
// tasks are written into one string and one slice, made at finish, not
// one string per address and one slice per task.
type render struct {
	addrs []byte         // every address of the frame, as text
	ends  []int          // where each address ends in addrs
	all   []wire.Address // every address of the frame, Addr set at finish
	spans []int          // per task of the frame: where its addresses end in all
}

func (r *render) reset() {
	r.addrs, r.ends, r.all, r.spans = r.addrs[:0], r.ends[:0], r.all[:0], r.spans[:0]
}

// task appends t, rendered for its node, to a's tasks (its addresses
// come at finish).
func (r *render) task(st *statemachine.State, t *statemachine.Task, a *wire.Assignments) {
	as := wire.Assignment{Task: t.ID, Slot: t.Slot, SpecVersion: t.SpecVersion, Desired: t.Desired, State: t.Status.State}
	if svc := st.Service(t.Service); svc != nil {
		as.Service = svc.Spec.Name
	}
	for _, at := range t.Attachments {
		r.addrs = AppendAttachmentAddr(r.addrs, st, at)
		r.ends = append(r.ends, len(r.addrs))
		var addr wire.Address
		if nw := st.Network(at.Network); nw != nil {
			addr.Network = nw.Name
		}
		r.all = append(r.all, addr)
	}
	r.spans = append(r.spans, len(r.all))
	a.Tasks = append(a.Tasks, as)
}

// finish gives the tasks rendered since the last reset, the last
// len(r.spans) of a's tasks, their addresses.
func (r *render) finish(a *wire.Assignments) {
	if len(r.all) == 0 {
		return
	}
	text := string(r.addrs)
	all := make([]wire.Address, len(r.all))
	start := 0
	for i, addr := range r.all {
		addr.Addr = text[start:r.ends[i]]
		all[i] = addr
		start = r.ends[i]
	}
	tasks := a.Tasks[len(a.Tasks)-len(r.spans):]
	start = 0
	for i, end := range r.spans {
		if end > start {
			tasks[i].Addresses = all[start:end:end]
		}
		start = end
	}
}

// session is what this manager remembers of an agent's session: which
// specs it already sent (each once per service, by ID, and version).
type session struct {
	mu   sync.Mutex // guards sent and given
	node statemachine.NodeID
	// sent is sorted (specKey.less): tens of keys per session on a node
	// with tasks of tens of services, thousands of sessions per replica;
	// a map keyed by name held about 2.8 KB per session at 1M/10k.
	sent []specKey
	// given is the cursor the last answer brought the agent to. A request
	// from another cursor means that answer was lost (or the agent
	// resyncs): the specs it carried are sent again.
	given wire.Cursor
}

// renderingLocked prepares the session's sent specs for an answer to a
// request from cursor, rendered now under ss.mu: the specs already sent
// are the ones the answer that brought the agent to cursor knew of. A
// request from another cursor than the last answer gave (that answer was
// lost, or the agent asked again while the manager still served its
// earlier poll), or from none, sends its specs again. This is checked
// where the answer is rendered, not where the request began: two polls
// of one session from one cursor (the agent gave up on the first) are
// rendered one after the other, and the second must not take the specs
// as sent by the first, which the agent may never get.
func (ss *session) renderingLocked(cursor wire.Cursor) {
	if len(cursor) == 0 || !slices.Equal(cursor, ss.given) {
		ss.sent = ss.sent[:0]
	}
}

// give records c as the cursor the answer being rendered brings the
// agent to (nil: none), in the session's own room: the cursor it is
// given lives in a frame or a request, which are reused once the answer
// is written (Release). The caller holds ss.mu.
func (ss *session) give(c wire.Cursor) {
	ss.given = append(ss.given[:0], c...)
}

// specKey names a spec as sent: by the service's group and ID (IDs are
// numbered per group) and version, not by name, since a service removed
// and created again under the same name starts again at version 1 with
// another spec, which the agent (its specs keyed by name and version)
// must be sent to replace the old one.
type specKey struct {
	group   uint16
	id      statemachine.ServiceID
	version uint32
}

func cmpSpecKey(a, b specKey) int {
	switch {
	case a.group != b.group:
		return int(a.group) - int(b.group)
	case a.id != b.id:
		return cmp.Compare(a.id, b.id)
	}
	return cmp.Compare(a.version, b.version)
}

// addSpec adds the spec of t to a frame unless this session has it.
func addSpec(ss *session, st *statemachine.State, t *statemachine.Task, a *wire.Assignments) {
	svc := st.Service(t.Service)
	if svc == nil {
		return
	}
	k := specKey{uint16(t.ID >> 48), svc.ID, t.SpecVersion} // a task ID's top 16 bits are its group
	i, found := slices.BinarySearchFunc(ss.sent, k, cmpSpecKey)
	if found {
		return
	}
	ss.sent = slices.Insert(ss.sent, i, k)
	sp, _ := svc.SpecAt(t.SpecVersion) // the scheduler reserved this spec's resources
	// The spec's argv and env are the state's own, shared and not copied:
	// a spec's lists are never written in place once applied (an update
	// is a new version), and they are handed out without spare capacity,
	// so a reader that appends to one copies it.
	a.Specs = append(a.Specs, wire.Spec{Service: svc.Spec.Name, Version: k.version, Command: full(sp.Command),
		Env: full(sp.Env), Dir: sp.Dir, StopGrace: sp.StopGrace})
}

// full returns s without room past its length (nil stays nil).
func full[T any](s []T) []T { return s[:len(s):len(s)] }

// complete answers with every task at or past assigned on node.
//
// A COMPLETE replaces the agent's whole set, so it must never be older than
// anything the agent saw: each group is rendered only once this replica has
// applied everything committed before the request (a read-index barrier),
// not from its state as applied so far. A replica that lags in a group (it
// restarted, or follows that group's leader under load) would otherwise
// hand back tasks the agent already stopped and forgot, and the agent would
// start them again with addresses since given to other tasks.
func (s *Stream) complete(ss *session, node statemachine.NodeID, resync bool) (*wire.Assignments, error) {
	groups := s.reads.Groups()
	if !s.bugs.completesEarly() {
		if err := s.caughtUp(groups); err != nil {
			return nil, err
		}
	}
	a := &wire.Assignments{Kind: wire.FrameComplete, Resync: resync, Last: true}
	a.ResultsIn, a.Seqs = cursorAndSeqs(groups)
	sc := getScratch()
	defer scratchPool.Put(sc)
	ss.mu.Lock()
	defer ss.mu.Unlock()    // the session's sent specs
	ss.renderingLocked(nil) // a COMPLETE carries every spec its tasks run
	g := 0
	read := func(st *statemachine.State) {
		a.ResultsIn[g] = st.LastIndex()
		if n := st.Node(node); n != nil {
			a.Seqs[g] = n.AssignSeq
		}
		tasks := st.NodeTasks(node)
		a.Tasks = slices.Grow(a.Tasks, len(tasks))
		for _, t := range tasks {
			addSpec(ss, st, t, a)
			sc.r.task(st, t, a)
		}
	}
	for g = 1; g <= groups; g++ {
		if err := s.reads.ReadLocal(g, read); err != nil {
			ss.give(nil) // the specs rendered so far go nowhere
			return nil, err
		}
	}
	sc.r.finish(a)
	ss.give(a.ResultsIn)
	s.frames.complete.Add(1)
	return a, nil
}

// frames holds INCREMENTAL frames handed back by Release, with their
// lists' room: a poll in a ramp carries a few tasks, and the frame, its
// cursor, its tasks and its specs were made anew for each.
var frames = sync.Pool{New: func() any { return new(wire.Assignments) }}

// maxPooledTasks bounds the room a released frame keeps: one that carried
// more tasks (a node's burst after a long wait) is left to the collector.
const maxPooledTasks = 1024

// newFrame returns an empty INCREMENTAL (Last) for groups 0..groups, its
// ResultsIn and Seqs zero.
func newFrame(groups int) *wire.Assignments {
	a := frames.Get().(*wire.Assignments)
	a.Kind, a.Last = wire.FrameIncremental, true
	n := groups + 1
	if cap(a.ResultsIn) < n || cap(a.Seqs) < n {
		a.ResultsIn, a.Seqs = cursorAndSeqs(groups)
		return a
	}
	a.ResultsIn, a.Seqs = a.ResultsIn[:n], a.Seqs[:n]
	clear(a.ResultsIn)
	clear(a.Seqs)
	return a
}

// Release hands back an INCREMENTAL frame this stream answered with, once
// it is written and nothing refers to it or to its lists any more (the
// API, after encoding it); the next answers reuse its room. A COMPLETE,
// nil, or a frame the caller keeps is never released. The frame's
// AppliesTo, the request's cursor, is the caller's and is not reused.
func (s *Stream) Release(a *wire.Assignments) {
	if a == nil || a.Kind != wire.FrameIncremental || cap(a.Tasks) > maxPooledTasks {
		return
	}
	clear(a.Tasks) // the tasks' addresses are the frame's own
	clear(a.Specs)
	*a = wire.Assignments{ResultsIn: a.ResultsIn[:0], Seqs: a.Seqs[:0], Tasks: a.Tasks[:0], Specs: a.Specs[:0],
		Removed: a.Removed[:0]}
	frames.Put(a)
}

// cursorAndSeqs returns a frame's cursor and sequences for groups
// 0..groups, both zero, in one allocation.
func cursorAndSeqs(groups int) (wire.Cursor, []uint64) {
	both := make([]uint64, 2*(groups+1))
	return wire.Cursor(both[: groups+1 : groups+1]), both[groups+1:]
}

// caughtUp waits until this replica applied, in every service group,
// everything committed before the call (the groups' barriers in parallel).
func (s *Stream) caughtUp(groups int) error {
	c, cancel := context.WithTimeout(context.Background(), completeWait)
	defer cancel()
	errs := make([]error, groups)
	eachGroup(groups, s.seq, func(i int) { errs[i] = s.reads.Read(c, i+1, func(*statemachine.State) {}) })
	if errors.Join(errs...) != nil {
		return &wire.Error{Code: wire.CodeUnavailable, RetryAfter: int64(time.Second),
			Message: "this manager cannot confirm it is up to date with the cluster (no quorum reached); retry"}
	}
	return nil
}

// incremental answers with node's changes since cursor, or a COMPLETE
// (resync) if this manager's journal does not reach back that far.
func (s *Stream) incremental(ss *session, node statemachine.NodeID, cursor wire.Cursor, sc *scratch) (*wire.Assignments, error) {
	groups := s.reads.Groups()
	a := newFrame(groups)
	a.AppliesTo = cursor
	copy(a.ResultsIn, cursor)
	sc.quiet = slices.Grow(sc.quiet[:0], groups+1)[:groups+1]
	sc.changed = slices.Grow(sc.changed[:0], groups+1)[:groups+1]
	s.feed.quietGroups(node, cursor, sc.quiet, sc.changed)
	sc.inc = incRead{s: s, ss: ss, node: node, cursor: cursor, a: a}
	defer func() { sc.inc = incRead{} }()
	ss.mu.Lock()
	ss.renderingLocked(cursor)
	for g := 1; g <= groups && !sc.inc.resync; g++ {
		if sc.quiet[g] != 0 {
			// Nothing for this node there: its cursor moves on without a
			// read under the group's lock (thousands of polls woken at
			// once, each reading every group, queued on those locks
			// behind the applies).
			a.ResultsIn[g] = max(a.ResultsIn[g], sc.quiet[g])
			continue
		}
		sc.inc.g = g
		if err := s.reads.ReadLocal(g, sc.read); err != nil {
			// The specs rendered so far go nowhere: the next answer
			// sends its specs again.
			ss.give(nil)
			ss.mu.Unlock()
			return nil, err
		}
	}
	resync := sc.inc.resync
	if !resync {
		ss.give(a.ResultsIn)
	}
	ss.mu.Unlock()
	if resync {
		s.Release(a)
		return s.complete(ss, node, true) // a fresh start: every spec again

	}
	sc.r.finish(a)
	a.Logs = s.logs.TakeNotices(node, s.clock.Now())
	s.frames.incremental.Add(1)
	return a, nil
}

// incRead is what an incremental answer's read of one group works on.
type incRead struct {
	s      *Stream
	ss     *session
	node   statemachine.NodeID
	cursor wire.Cursor
	a      *wire.Assignments
	g      int
	resync bool // the journal does not reach back to the cursor in g
}

// readChanges renders group g's changes for the answer in sc.inc (the
// caller holds the session's lock).
func (sc *scratch) readChanges(st *statemachine.State) {
	r := &sc.inc
	a, g, node := r.a, r.g, r.node
	es, ok := r.s.feed.nodeChanges(sc.es[:0], node, g, r.cursor.Get(g))
	sc.es = es
	if !ok {
		r.resync = true
		return
	}
	a.ResultsIn[g] = max(a.ResultsIn[g], st.LastIndex())
	if n := st.Node(node); n != nil {
		a.Seqs[g] = n.AssignSeq
	}
	a.Tasks = slices.Grow(a.Tasks, len(es))
	clear(sc.seen)
	for i, e := range es {
		if e.echo() || seenBefore(es, i, sc.seen) {
			continue
		}
		t := st.Task(e.task)
		if t == nil || t.Node != node {
			a.Removed = append(a.Removed, e.task)
			continue
		}
		addSpec(r.ss, st, t, a)
		sc.r.task(st, t, a)
	}
}

// seenBefore reports whether a change before es[i] (not an echo) names
// the same task: each task is rendered once per answer. A short list is
// searched; a long one is looked up in seen (the caller clears it per
// list).
func seenBefore(es []jentry, i int, seen map[statemachine.TaskID]bool) bool {
	const short = 32
	if len(es) <= short {
		for _, e := range es[:i] {
			if !e.echo() && e.task == es[i].task {
				return true
			}
		}
		return false
	}
	if seen[es[i].task] {
		return true
	}
	seen[es[i].task] = true
	return false
}

// managerAddr returns the API address replica id registered in the
// cluster group ("" for 0 or one that registered none).
func (s *Stream) managerAddr(id uint64) string {
	if id == 0 {
		return ""
	}
	var addr string
	_ = s.reads.ReadLocal(route.ClusterGroup, func(st *statemachine.State) { addr = st.Managers()[id] })
	return addr
}

// AttachmentAddr renders a task's address on a network as the agent and
// the API show it: the address with its network's prefix length
// ("10.0.0.2/24"), or the bare address if the network has no pool here.
func AttachmentAddr(st *statemachine.State, a statemachine.Attachment) string {
	var buf [len("255.255.255.255/32")]byte
	return string(AppendAttachmentAddr(buf[:0], st, a))
}

// AppendAttachmentAddr appends AttachmentAddr(st, a) to b, for a caller
// writing many (the event stream).
func AppendAttachmentAddr(b []byte, st *statemachine.State, a statemachine.Attachment) []byte {
	ip := netip.AddrFrom4([4]byte{byte(a.Addr >> 24), byte(a.Addr >> 16), byte(a.Addr >> 8), byte(a.Addr)})
	if p := st.Pool(a.Network); p != nil {
		return netip.PrefixFrom(ip, p.Prefix().Bits()).AppendTo(b)
	}
	return ip.AppendTo(b)
}
