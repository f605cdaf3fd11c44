package watch

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shoal/api/client"
)

// fakeManager serves a task list of two pages and an event stream that
// keeps events after a floor, like a manager's ring. While the list's
// second page is asked for, task 2 starts running (event 1); once the
// list was read, the ring drops that event (the floor passes it), as a
// busy manager's ring does while a long list is read.
type fakeManager struct {
	mu      sync.Mutex
	events  []client.Event // event i has index i+1
	floor   int            // events with index ≤ floor are gone
	sent    chan struct{}  // closed once event 1 went out on a stream
	once    sync.Once
	changed chan struct{}
}

func (m *fakeManager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/tasks":
		w.Header().Set("X-Shoal-Index", "0")
		if r.URL.Query().Get("next_token") == "" {
			_ = json.NewEncoder(w).Encode(client.List[client.Task]{Items: []client.Task{{ID: "1", State: "running"}}, NextToken: "p2"})
			return
		}
		m.mu.Lock()
		m.events = append(m.events, client.Event{Topic: "task", Type: "state", Key: "2", Index: "1",
			Task: &client.Task{ID: "2", State: "running"}})
		close(m.changed)
		m.mu.Unlock()
		// The page is answered once the event went out on a stream, or
		// after a while if no stream is open to take it.
		select {
		case <-m.sent:
		case <-time.After(2 * time.Second):
		}
		m.mu.Lock()
		m.floor = len(m.events)
		m.mu.Unlock()
		_ = json.NewEncoder(w).Encode(client.List[client.Task]{Items: []client.Task{{ID: "2", State: "pending"}}})
	case "/v1/events":
		from, _ := strconv.Atoi(r.URL.Query().Get("index"))
		m.mu.Lock()
		if from < m.floor {
			m.mu.Unlock()
			w.WriteHeader(http.StatusGone)
			_ = json.NewEncoder(w).Encode(client.ErrorBody{Code: client.CodeIndexTooOld, Error: "too old"})
			return
		}
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			m.mu.Lock()
			evs, changed := m.events[from:], m.changed
			m.mu.Unlock()
			for _, ev := range evs {
				_ = json.NewEncoder(w).Encode(ev)
				w.(http.Flusher).Flush()
				from++
				if ev.Index == "1" {
					m.once.Do(func() { close(m.sent) })
				}
			}
			select {
			case <-r.Context().Done():
				return
			case <-changed:
			}
		}
	default:
		http.NotFound(w, r)
	}
}

// A resync hands over the list and then every event that happened while
// the list was read, on a later connection than the list's, even when the
// manager no longer keeps those events once the list is read; the stream
// then resumes after them.
func TestResyncKeepsTheEventsOfItsOwnList(t *testing.T) {
	m := &fakeManager{sent: make(chan struct{}), changed: make(chan struct{})}
	srv := httptest.NewServer(m)
	defer srv.Close()
	type got struct {
		what string
		conn int
	}
	var mu sync.Mutex
	var seen []got
	f := New(Config{Managers: []string{srv.URL},
		Event: func(ev client.Event, conn int, _ time.Time) {
			mu.Lock()
			defer mu.Unlock()
			if ev.Task != nil {
				seen = append(seen, got{"event " + ev.Task.ID + " " + ev.Task.State, conn})
			}
		},
		Resync: func(tasks []client.Task, conn int) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, got{"list of " + strconv.Itoa(len(tasks)), conn})
		}})
	f.resync(context.Background(), srv.URL, 1)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0].what != "list of 2" || seen[1].what != "event 2 running" || seen[1].conn <= seen[0].conn {
		t.Fatalf("a resync handed over %+v; want the list of 2, then task 2 running on a later connection", seen)
	}
	if idx := f.Index(); idx != "1" {
		t.Fatalf("the stream would resume from %q, want after the last event handed over (1)", idx)
	}
}

// Events held during a resync come back in the order they arrived, across
// chunk boundaries, none lost.
func TestHeldEventsKeepTheirOrder(t *testing.T) {
	var h heldEvents
	const n = 3*heldChunk + 17
	for i := range n {
		h.add(client.Event{Raft: uint64(i)}, time.Unix(int64(i), 0))
	}
	i := 0
	for _, chunk := range h.chunks {
		for _, h := range chunk {
			if h.ev.Raft != uint64(i) || h.read.Unix() != int64(i) {
				t.Fatalf("held event %d is event %d read at %d", i, h.ev.Raft, h.read.Unix())
			}
			i++
		}
	}
	if i != n || h.n != n {
		t.Fatalf("held %d events (counted %d), added %d", i, h.n, n)
	}
}

// Follow hands every event it read to Event in the stream's order before
// it returns, and never after; Position counts an event only once Event
// has it.
func TestFollowHandsEveryEventInOrder(t *testing.T) {
	const n = 50000
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/events" {
			http.NotFound(w, r)
			return
		}
		enc := json.NewEncoder(w)
		for i := 1; i <= n; i++ {
			_ = enc.Encode(client.Event{Topic: "task", Type: "state", Group: 1, Raft: uint64(i), Index: strconv.Itoa(i)})
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var f *Follower
	var returned atomic.Bool
	var got []uint64
	f = New(Config{Managers: []string{srv.URL}, Event: func(ev client.Event, _ int, _ time.Time) {
		if returned.Load() {
			t.Errorf("event %d handed after Follow returned", ev.Raft)
		}
		if p := f.Position()[1]; p >= ev.Raft {
			t.Errorf("Position says %d while event %d is being handed", p, ev.Raft)
		}
		got = append(got, ev.Raft)
		if ev.Raft == n/2 {
			cancel() // the reader has read further: those are handed too
		}
	}})
	f.Follow(ctx)
	returned.Store(true)
	if len(got) < n/2 {
		t.Fatalf("%d events handed, want at least %d", len(got), n/2)
	}
	for i, r := range got {
		if r != uint64(i+1) {
			t.Fatalf("event %d handed as number %d", r, i+1)
		}
	}
	if events, _, _ := f.Stats(); int(events) != len(got) {
		t.Errorf("%d events read, %d handed", events, len(got))
	}
	if p := f.Position()[1]; p != uint64(len(got)) {
		t.Errorf("Position %d after %d events", p, len(got))
	}
}
