package control

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"shoal/statemachine"
	"shoal/wire"
)

// The log broker (docs/logs.md): task output from the agents to the user
// who asked for it, through the manager the user asked, with nothing
// committed to Raft.
//
// A subscription lives on the manager the user's request reached (its
// holder), in memory, for as long as the request. Its notice — which tasks
// of which nodes, and the holder's API address — is put on every manager
// (the holder's API forwards it to its peers and renews it); each manager
// hands it, inside the next answer to an assignment poll, to every node it
// names whose poll it holds. A node posts its lines straight to the holder,
// which buffers them, bounded, for the user's stream to take. A notice
// not renewed for NoticeTTL is forgotten, so a holder that died leaves
// nothing behind for long.

// LogConfig bounds a LogBroker. Zero values take the defaults named.
type LogConfig struct {
	// PerSubscription is the most bytes of lines buffered for one
	// subscription (a line counts its text plus entryOverhead). Lines that
	// do not fit are dropped and counted, and the reader is told. Default
	// 1 MiB.
	PerSubscription int
	// Total is the most bytes buffered for all subscriptions of this
	// manager together. Default 32 MiB.
	Total int
	// MaxSubscriptions is the most subscriptions this manager holds at
	// once; more are refused (ErrTooManyLogSubscriptions). Default 256.
	MaxSubscriptions int
	// MaxNotices is the most notices (this manager's subscriptions and its
	// peers') kept; more are refused. Default 4096.
	MaxNotices int
	// NoticeTTL is how long a notice is kept after its last renewal.
	// Default 15 s.
	NoticeTTL time.Duration
	// Renew is how often a holder renews its subscriptions' notices, and
	// starts a new round for the nodes that have not answered. Default 3 s.
	Renew time.Duration
	// GiveUp is how long a holder waits for a node that sends nothing
	// before it says so (twice that for a node that stopped sending).
	// Default 5 s.
	GiveUp time.Duration
}

func (c LogConfig) withDefaults() LogConfig {
	if c.PerSubscription <= 0 {
		c.PerSubscription = 1 << 20
	}
	if c.Total <= 0 {
		c.Total = 32 << 20
	}
	if c.MaxSubscriptions <= 0 {
		c.MaxSubscriptions = 256
	}
	if c.MaxNotices <= 0 {
		c.MaxNotices = 4096
	}
	if c.NoticeTTL <= 0 {
		c.NoticeTTL = 15 * time.Second
	}
	if c.Renew <= 0 {
		c.Renew = 3 * time.Second
	}
	if c.GiveUp <= 0 {
		c.GiveUp = 5 * time.Second
	}
	return c
}

// entryOverhead is what one buffered line counts beyond its text.
const entryOverhead = 48

// ErrTooManyLogSubscriptions: this manager holds as many subscriptions as
// it may (LogConfig.MaxSubscriptions) or knows as many notices.
var ErrTooManyLogSubscriptions = errors.New("too many log readers on this manager; retry later or ask another manager")

// LogEntry is one line of a task's output, or a note (Stream
// wire.LogNote) about a task's or a node's output.
type LogEntry struct {
	Task   statemachine.TaskID // 0 for a note about a whole node
	Node   statemachine.NodeID
	Stream wire.LogStream
	At     int64 // unix ns
	Data   string
}

// LogBroker holds this manager's log subscriptions and the notices of
// every manager's. It is safe for concurrent use. Time comes in as
// arguments.
type LogBroker struct {
	cfg LogConfig
	mu  struct {
		sync.Mutex
		subs     map[uint64]*LogSub
		buffered int // bytes, all subscriptions
		// lines taken and dropped since the broker started (its own
		// notes not counted).
		lines, dropped uint64
		notices        map[uint64]*notice
		byNode         map[statemachine.NodeID]map[uint64]*notice
		wake           map[statemachine.NodeID]chan struct{}
	}
}

// NewLogBroker returns an empty broker.
func NewLogBroker(cfg LogConfig) *LogBroker {
	b := &LogBroker{cfg: cfg.withDefaults()}
	b.mu.subs = map[uint64]*LogSub{}
	b.mu.notices = map[uint64]*notice{}
	b.mu.byNode = map[statemachine.NodeID]map[uint64]*notice{}
	b.mu.wake = map[statemachine.NodeID]chan struct{}{}
	return b
}

// LogStats is what a broker has carried: lines of task output taken and
// dropped (they did not fit the bounds) since it started, and the
// subscriptions it holds and the bytes it buffers now.
type LogStats struct {
	Lines, Dropped          uint64
	Subscriptions, Buffered int
}

// Stats returns the broker's counts (zero for a nil broker).
func (b *LogBroker) Stats() LogStats {
	if b == nil {
		return LogStats{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return LogStats{Lines: b.mu.lines, Dropped: b.mu.dropped, Subscriptions: len(b.mu.subs), Buffered: b.mu.buffered}
}

// Config returns the broker's bounds with the defaults filled in.
func (b *LogBroker) Config() LogConfig { return b.cfg }

// Buffered returns the bytes buffered for all subscriptions now.
func (b *LogBroker) Buffered() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.buffered
}

// LogSub is one subscription held by this manager: the lines published
// for it wait in its buffer until its reader takes them.
type LogSub struct {
	ID     uint64
	b      *LogBroker
	follow bool
	tasks  map[statemachine.TaskID]statemachine.NodeID
	ready  chan struct{} // a value when there is something new to take
	// Guarded by b.mu.
	q       []LogEntry
	bytes   int
	dropped int
	waiting map[statemachine.NodeID]bool // nodes that have not said done
	started map[statemachine.NodeID]bool // nodes that published anything
	closed  bool
}

// Open starts holding subscription id, for tasks (task → its node).
// With follow, the subscription never finishes by itself; without, it
// finishes when every node said done or was given up (NodeGone).
func (b *LogBroker) Open(id uint64, tasks map[statemachine.TaskID]statemachine.NodeID, follow bool) (*LogSub, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.mu.subs) >= b.cfg.MaxSubscriptions {
		return nil, ErrTooManyLogSubscriptions
	}
	if _, dup := b.mu.subs[id]; dup {
		return nil, fmt.Errorf("log subscription %d exists already; retry", id)
	}
	s := &LogSub{ID: id, b: b, follow: follow, tasks: tasks, ready: make(chan struct{}, 1),
		waiting: map[statemachine.NodeID]bool{}, started: map[statemachine.NodeID]bool{}}
	for _, n := range tasks {
		s.waiting[n] = true
	}
	b.mu.subs[id] = s
	return s, nil
}

// AddTask makes the subscription take task's output from node as well (a
// followed service's new task).
func (s *LogSub) AddTask(task statemachine.TaskID, node statemachine.NodeID) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if _, ok := s.tasks[task]; ok {
		return
	}
	s.tasks[task] = node
	if !s.follow {
		s.waiting[node] = true
	}
}

// Nodes returns the nodes the subscription still waits for, and of them
// those that have published nothing yet.
func (s *LogSub) Nodes() (waiting, silent []statemachine.NodeID) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	for n := range s.waiting {
		waiting = append(waiting, n)
		if !s.started[n] {
			silent = append(silent, n)
		}
	}
	return waiting, silent
}

// Take returns what was published since the last Take: the entries in
// order and how many lines were dropped meanwhile because the buffer was
// full. finished says nothing more will come (without follow: every node
// done or given up). Ready fires when Take has something new.
func (s *LogSub) Take() (entries []LogEntry, dropped int, finished bool) {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	entries, dropped = s.q, s.dropped
	s.q, s.dropped = nil, 0
	b.mu.buffered -= s.bytes
	s.bytes = 0
	return entries, dropped, !s.follow && len(s.waiting) == 0
}

// Ready returns a channel that has a value when Take has something new.
func (s *LogSub) Ready() <-chan struct{} { return s.ready }

// NodeGone gives up on node: a note says why (as the entry of task 0), and
// the subscription no longer waits for it. Lines it sends later are still
// taken.
func (s *LogSub) NodeGone(node statemachine.NodeID, why string, now time.Time) {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if !s.waiting[node] {
		return
	}
	delete(s.waiting, node)
	s.addLocked(LogEntry{Node: node, Stream: wire.LogNote, At: now.UnixNano(), Data: why}, true)
	s.signal()
}

// Note adds a note from this manager about a task (or, with task 0, a
// whole node): one whose node cannot send its output, say.
func (s *LogSub) Note(node statemachine.NodeID, task statemachine.TaskID, msg string, now time.Time) {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	s.addLocked(LogEntry{Task: task, Node: node, Stream: wire.LogNote, At: now.UnixNano(), Data: msg}, true)
	s.signal()
}

// Close stops holding the subscription: its buffer is freed and later
// batches for it are answered stop.
func (s *LogSub) Close() {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	delete(b.mu.subs, s.ID)
	b.mu.buffered -= s.bytes
	s.q, s.bytes = nil, 0
}

// addLocked buffers e if it fits (always, with force: the broker's own
// notes are few); otherwise the line is counted as dropped.
func (s *LogSub) addLocked(e LogEntry, force bool) {
	b := s.b
	n := len(e.Data) + entryOverhead
	if !force && (s.bytes+n > b.cfg.PerSubscription || b.mu.buffered+n > b.cfg.Total) {
		s.dropped++
		b.mu.dropped++
		return
	}
	if !force {
		b.mu.lines++
	}
	s.q = append(s.q, e)
	s.bytes += n
	b.mu.buffered += n
}

func (s *LogSub) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Publish takes a node's batch for a subscription held here. It never
// waits: lines that do not fit the bounds are dropped (the reader is
// told). stop says the subscription is not held here (any more): the node
// sends nothing more for it. A line of a task the subscription does not
// expect from node is refused, and nothing of the batch is taken: a node
// publishes only its own tasks' output.
func (b *LogBroker) Publish(node statemachine.NodeID, batch *wire.LogBatch) (stop bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.mu.subs[batch.Sub]
	if s == nil {
		return true, nil
	}
	for i := range batch.Lines {
		if owner, ok := s.tasks[batch.Lines[i].Task]; !ok || owner != node {
			return false, &wire.Error{Code: wire.CodeForbidden,
				Message: fmt.Sprintf("task %d is not a task of node %d in this log subscription; a node sends only its own tasks' output", batch.Lines[i].Task, node)}
		}
	}
	s.started[node] = true
	for _, l := range batch.Lines {
		s.addLocked(LogEntry{Task: l.Task, Node: node, Stream: l.Stream, At: l.At, Data: l.Data}, false)
	}
	if batch.Done {
		delete(s.waiting, node)
	}
	s.signal()
	return false, nil
}

// Notice is what every manager knows of a subscription: enough to hand
// it to the nodes it names.
type Notice struct {
	ID      uint64
	Publish string // the holder's API address
	Follow  bool
	Tail    int64
	Since   int64
	Nodes   map[statemachine.NodeID][]statemachine.TaskID
	// Round grows when the holder wants the nodes that have not answered
	// yet to be told again (an answer carrying the notice may have been
	// lost): a manager hands a notice to a node once per round.
	Round uint32
}

type notice struct {
	Notice
	expires   time.Time
	delivered map[statemachine.NodeID]uint32 // round+1 handed to the node
}

// PutNotice records n (or renews it), kept NoticeTTL after now, and wakes
// the polls of the nodes it names that have not had this round.
func (b *LogBroker) PutNotice(n Notice, now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expireLocked(now)
	old := b.mu.notices[n.ID]
	if old == nil && len(b.mu.notices) >= b.cfg.MaxNotices {
		return ErrTooManyLogSubscriptions
	}
	nn := &notice{Notice: n, expires: now.Add(b.cfg.NoticeTTL), delivered: map[statemachine.NodeID]uint32{}}
	if old != nil {
		b.unindexLocked(old)
		for node, r := range old.delivered {
			if _, still := n.Nodes[node]; still {
				nn.delivered[node] = r
			}
		}
	}
	b.mu.notices[n.ID] = nn
	for node := range n.Nodes {
		m := b.mu.byNode[node]
		if m == nil {
			m = map[uint64]*notice{}
			b.mu.byNode[node] = m
		}
		m[n.ID] = nn
		if nn.delivered[node] != n.Round+1 {
			b.wakeLocked(node)
		}
	}
	return nil
}

// EndNotice forgets subscription id's notice.
func (b *LogBroker) EndNotice(id uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.mu.notices[id]; n != nil {
		b.unindexLocked(n)
		delete(b.mu.notices, id)
	}
}

// Notices returns how many notices this manager keeps now.
func (b *LogBroker) Notices(now time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expireLocked(now)
	return len(b.mu.notices)
}

func (b *LogBroker) unindexLocked(n *notice) {
	for node := range n.Nodes {
		if m := b.mu.byNode[node]; m != nil {
			delete(m, n.ID)
			if len(m) == 0 {
				delete(b.mu.byNode, node)
			}
		}
	}
}

func (b *LogBroker) expireLocked(now time.Time) {
	for id, n := range b.mu.notices {
		if !now.Before(n.expires) {
			b.unindexLocked(n)
			delete(b.mu.notices, id)
		}
	}
}

func (b *LogBroker) wakeLocked(node statemachine.NodeID) {
	if ch, ok := b.mu.wake[node]; ok {
		close(ch)
		delete(b.mu.wake, node)
	}
}

// NoticeWake returns a channel closed when a notice for node arrives (a
// poll of node's waits on it beside its other reasons to answer).
func (b *LogBroker) NoticeWake(node statemachine.NodeID) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch, ok := b.mu.wake[node]
	if !ok {
		ch = make(chan struct{})
		b.mu.wake[node] = ch
	}
	return ch
}

// HasNotices reports whether node has notices it was not handed in
// their current round.
func (b *LogBroker) HasNotices(node statemachine.NodeID, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range b.mu.byNode[node] {
		if now.Before(n.expires) && n.delivered[node] != n.Round+1 {
			return true
		}
	}
	return false
}

// TakeNotices returns node's subscriptions it was not handed in their
// current round, and counts them handed.
func (b *LogBroker) TakeNotices(node statemachine.NodeID, now time.Time) []wire.LogSubscription {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []wire.LogSubscription
	for _, n := range b.mu.byNode[node] {
		if !now.Before(n.expires) || n.delivered[node] == n.Round+1 {
			continue
		}
		n.delivered[node] = n.Round + 1
		out = append(out, wire.LogSubscription{ID: n.ID, Publish: n.Publish, Tasks: n.Nodes[node],
			Follow: n.Follow, Tail: n.Tail, Since: n.Since})
	}
	slices.SortFunc(out, func(a, b wire.LogSubscription) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
