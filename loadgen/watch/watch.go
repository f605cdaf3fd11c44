package watch

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"shoal/api/client"
)

// Config describes what to follow.
type Config struct {
	Managers []string // API addresses
	Index    string   // start index token ("" : now)
	// Event receives every event (heartbeats included) with the
	// connection number it came on and when it was read (the events a
	// resync held come after its list, later than they were read).
	Event func(ev client.Event, conn int, read time.Time)
	// Resync receives the full task list read after the stream could not
	// resume.
	Resync func(tasks []client.Task, conn int)
	// Dial returns a client of a manager; default client.New (plain HTTP).
	Dial func(addr string) (*client.Client, error)
}

// Follower follows the stream; see Follow.
type Follower struct {
	cfg Config
	mu  struct {
		sync.Mutex
		index      string
		pos        map[int]uint64 // group → last Raft index seen
		conn       int
		reconnects int
		resyncs    int
		events     int64
	}
}

// New returns a follower.
func New(cfg Config) *Follower {
	if cfg.Dial == nil {
		cfg.Dial = client.New
	}
	f := &Follower{cfg: cfg}
	f.mu.index = cfg.Index
	f.mu.pos = map[int]uint64{}
	return f
}

// Stats returns how many events were read, reconnects and resyncs.
func (f *Follower) Stats() (events int64, reconnects, resyncs int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.events, f.mu.reconnects, f.mu.resyncs
}

// Position returns, per group, the Raft index of the last event handed to
// Config.Event.
func (f *Follower) Position() map[int]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[int]uint64, len(f.mu.pos))
	for g, i := range f.mu.pos {
		out[g] = i
	}
	return out
}

// Follow follows the stream until ctx ends, handing each event to the
// callbacks as it is read, on the calling goroutine. (Reading on one
// goroutine and checking on another took twice the events in a
// million-task ramp, and the replica rendering them took CPU its peers
// needed: at 10,000 agents leaderships moved mid-ramp, and one run never
// finished its creates. The loadgen's view is its instrument, and an
// instrument must not bend what it measures: see perf/NOTEBOOK.md.)
func (f *Follower) Follow(ctx context.Context) {
	next := 0
	tooOld := 0
	for ctx.Err() == nil {
		addr := f.cfg.Managers[next%len(f.cfg.Managers)]
		next++
		f.mu.Lock()
		f.mu.conn++
		conn, index := f.mu.conn, f.mu.index
		f.mu.Unlock()
		c, err := f.dialStream(addr)
		if err != nil {
			return
		}
		got := false
		err = c.Events(ctx, index, nil, func(ev client.Event) error {
			got = true
			f.deliver(ev, conn, time.Now())
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Code == client.CodeIndexTooOld {
			tooOld++
			if tooOld >= len(f.cfg.Managers) {
				f.resync(ctx, addr, conn)
				tooOld = 0
			}
			continue
		}
		if got {
			tooOld = 0
		}
		f.mu.Lock()
		f.mu.reconnects++
		f.mu.Unlock()
		if !got {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// dialStream returns a client of addr for one stream, with a decoder of
// its own (Decoder: the codec's outcome, at a fraction of its cost).
func (f *Follower) dialStream(addr string) (*client.Client, error) {
	c, err := f.cfg.Dial(addr)
	if err != nil {
		return nil, err
	}
	c.DecodeEvent = NewDecoder().Decode
	return c, nil
}

// deliver moves the resume point past ev, read on connection conn at
// read, and hands it to Event; its Raft index counts in Position once
// Event has it.
func (f *Follower) deliver(ev client.Event, conn int, read time.Time) {
	f.mu.Lock()
	f.mu.events++
	if ev.Index != "" {
		f.mu.index = ev.Index
	}
	f.mu.Unlock()
	f.cfg.Event(ev, conn, read)
	f.mu.Lock()
	if ev.Raft > f.mu.pos[ev.Group] {
		f.mu.pos[ev.Group] = ev.Raft
	}
	f.mu.Unlock()
}

// maxHeld bounds the events a resync holds while it reads the task list;
// past it the stream is left and resumed afterwards from the last held
// event, if the managers still keep what followed.
const maxHeld = 2_000_000

// resync reads every task from addr (pages of 10,000) and hands the list
// to the sink, then the events that happened since its first page. Those
// are followed while the rest of the list is read, from the first page's
// index: reading a million tasks from a busy cluster takes longer than a
// manager keeps events, and a stream opened only after the list could
// never resume from it (the loadgen then read the whole list again,
// every minute of a million-task ramp). The list goes in on connection
// conn and the held events on the next one, so that a list page rendered
// after one of those events is not taken for a task moving back.
func (f *Follower) resync(ctx context.Context, addr string, conn int) {
	c, err := f.cfg.Dial(addr)
	if err != nil {
		return
	}
	// The pages are read with a decoder of the loadgen's own (ListDecoder:
	// the codec's outcome, at a fraction of its cost).
	c.DecodeTasks = NewListDecoder().Decode
	page := func(token string) (client.List[client.Task], string, error) {
		p := url.Values{"per_page": {strconv.Itoa(10000)}}
		if token != "" {
			p.Set("next_token", token)
		}
		return c.Tasks(ctx, &client.Query{Params: p})
	}
	l, first, err := page("")
	if err != nil {
		return // the next attempt tries again
	}
	// The pages are kept apart and joined once: appending a million
	// tasks page by page copied the growing list over and over (a sixth
	// of the loadgen's CPU in a million-task ramp).
	pages := [][]client.Task{l.Items}
	var held heldEvents
	var heldMu sync.Mutex
	sctx, stop := context.WithCancel(ctx)
	streamed := make(chan struct{})
	go func() {
		defer close(streamed)
		sc, err := f.dialStream(addr)
		if err != nil {
			return
		}
		_ = sc.Events(sctx, first, nil, func(ev client.Event) error {
			heldMu.Lock()
			defer heldMu.Unlock()
			held.add(ev, time.Now())
			if held.n >= maxHeld {
				return errors.New("enough held")
			}
			return nil
		})
	}()
	for token := l.NextToken; token != ""; token = l.NextToken {
		if l, _, err = page(token); err != nil {
			stop()
			<-streamed
			return
		}
		pages = append(pages, l.Items)
	}
	stop()
	<-streamed
	f.mu.Lock()
	f.mu.index = first
	f.mu.resyncs++
	f.mu.conn = max(f.mu.conn, conn) + 1
	evConn := f.mu.conn
	f.mu.Unlock()
	if f.cfg.Resync != nil {
		f.cfg.Resync(slices.Concat(pages...), conn)
	}
	for _, chunk := range held.chunks {
		for _, h := range chunk {
			f.deliver(h.ev, evConn, h.read)
		}
	}
}

// heldEvents is the events a resync holds, with when each was read, in
// chunks of heldChunk, so that holding two million of them never copies
// the ones held before.
type heldEvents struct {
	chunks [][]heldEvent
	n      int
}

type heldEvent struct {
	ev   client.Event
	read time.Time
}

const heldChunk = 4096

func (h *heldEvents) add(ev client.Event, read time.Time) {
	if k := len(h.chunks); k == 0 || len(h.chunks[k-1]) == heldChunk {
		h.chunks = append(h.chunks, make([]heldEvent, 0, heldChunk))
	}
	k := len(h.chunks) - 1
	h.chunks[k] = append(h.chunks[k], heldEvent{ev, read})
	h.n++
}

// Index returns the index token to resume after the last event read.
func (f *Follower) Index() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.index
}
