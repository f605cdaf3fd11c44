package watch

import (
	"context"
	"errors"
	"net/url"
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
	// connection number it came on.
	Event func(ev client.Event, conn int)
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

// Position returns the Raft index of the last event seen per group.
func (f *Follower) Position() map[int]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[int]uint64, len(f.mu.pos))
	for g, i := range f.mu.pos {
		out[g] = i
	}
	return out
}

// Follow follows the stream until ctx ends.
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
		c, err := f.cfg.Dial(addr)
		if err != nil {
			return
		}
		got := false
		err = c.Events(ctx, index, nil, func(ev client.Event) error {
			got = true
			f.mu.Lock()
			f.mu.events++
			if ev.Index != "" {
				f.mu.index = ev.Index
			}
			if ev.Raft > f.mu.pos[ev.Group] {
				f.mu.pos[ev.Group] = ev.Raft
			}
			f.mu.Unlock()
			f.cfg.Event(ev, conn)
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

// resync reads every task from addr (pages of 10,000) and follows from
// the first page's index.
func (f *Follower) resync(ctx context.Context, addr string, conn int) {
	c, err := f.cfg.Dial(addr)
	if err != nil {
		return
	}
	var all []client.Task
	var first string
	token := ""
	for {
		p := url.Values{"per_page": {strconv.Itoa(10000)}}
		if token != "" {
			p.Set("next_token", token)
		}
		l, idx, err := c.Tasks(ctx, &client.Query{Params: p})
		if err != nil {
			return // the next attempt tries again
		}
		if first == "" {
			first = idx
		}
		all = append(all, l.Items...)
		if l.NextToken == "" {
			break
		}
		token = l.NextToken
	}
	f.mu.Lock()
	f.mu.index = first
	f.mu.resyncs++
	f.mu.Unlock()
	if f.cfg.Resync != nil {
		f.cfg.Resync(all, conn)
	}
}

// Index returns the index token to resume after the last event read.
func (f *Follower) Index() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.index
}
