package api

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"shoal/api/client"
	"shoal/internal/jsoncodec"
	"shoal/manager/control"
	"shoal/statemachine"
)

// An event's line is its resume token (which depends on where the stream
// began) followed by what the change renders to: the change's fields and
// its object as this replica has it when sending. The second part is
// rendered once per change and state, into bytes that every stream
// reading that change at that state shares (eventCache); each stream
// writes only its token in front.

// emptyIndex is how an event's line begins when its index is empty: the
// part of a line rendered once starts right after it.
const emptyIndex = `{"index":"",`

// eventPageBuf is what a stream reuses from one part of a page of events
// to the next (eventStream.next).
type eventPageBuf struct {
	arena  bytes.Buffer       // this part's renders, each after emptyIndex
	enc    *jsoncodec.Encoder // writes to arena
	tokens []byte             // this part's resume tokens
	spans  []span             // per event the stream follows: its token in tokens
	lines  []eventLine        // per event the stream follows, in order
	groups map[int][]int      // per group: positions in lines
	ev     client.Event       // the event being rendered
	task   client.Task
	svc    client.Service
	node   client.Node
}

// eventLine is one event of a page: its change, its resume token, and its
// render: arena[off:end], or shared.
type eventLine struct {
	change   control.Change
	token    span // in the page's tokens
	off, end int
	shared   []byte
}

// renderEvents appends to buf the lines of the changes[lo:hi] the stream
// follows (topics; none: all), with their objects as this replica has them
// now, one read per group; each line carries its resume token (run, which
// went through changes[:lo]: resumeTokens).
func (s *Server) renderEvents(buf *bytes.Buffer, p *eventPageBuf, changes []control.Change, lo, hi int, topics map[string]bool, run *tokenRun) error {
	follows := func(c control.Change) bool {
		topic, _ := topicOf(c.Kind)
		return topic != "" && (len(topics) == 0 || topics[topic])
	}
	p.tokens, p.spans = run.append(p.tokens[:0], p.spans[:0], changes, lo, hi, follows)
	p.lines = p.lines[:0]
	if p.groups == nil {
		p.groups = map[int][]int{}
	}
	for g, idx := range p.groups {
		p.groups[g] = idx[:0]
	}
	for _, c := range changes[lo:hi] {
		if !follows(c) {
			continue
		}
		p.groups[int(c.Group)] = append(p.groups[int(c.Group)], len(p.lines))
		p.lines = append(p.lines, eventLine{change: c, token: p.spans[len(p.lines)]})
	}
	if len(p.lines) == 0 {
		return nil
	}
	p.arena.Reset()
	if p.enc == nil {
		p.enc = jsoncodec.NewEncoder(&p.arena)
	}
	share := s.eventLines.sharing()
	var err error
	for g, idx := range p.groups {
		if len(idx) == 0 {
			continue
		}
		read := false
		_ = s.reads.ReadLocal(g, func(st *statemachine.State) {
			read = true
			stamp := st.LastIndex()
			for _, i := range idx {
				l := &p.lines[i]
				if share {
					if b := s.eventLines.get(l.change, stamp); b != nil {
						l.shared = b
						continue
					}
				}
				if err = p.render(l, st); err != nil {
					return
				}
				if share {
					s.eventLines.put(l.change, stamp, p.arena.Bytes()[l.off:l.end])
				}
			}
		})
		if err != nil {
			return err
		}
		if !read { // no state to read: the events go without their objects
			for _, i := range idx {
				if err := p.render(&p.lines[i], nil); err != nil {
					return err
				}
			}
		}
	}
	for i := range p.lines {
		l := &p.lines[i]
		rest := l.shared
		if rest == nil {
			rest = p.arena.Bytes()[l.off:l.end]
		}
		buf.WriteString(`{"index":"`)
		buf.Write(p.tokens[l.token.off:l.token.end]) // URL-safe base64: nothing to escape
		buf.WriteString(`",`)
		buf.Write(rest)
	}
	resetKeepingLittle(&p.arena) // nothing refers to the renders now (the cache keeps copies)
	if cap(p.tokens) > keepBuffer {
		p.tokens = nil
	}
	return nil
}

// render renders l's change with its object as st has it (st nil: without
// it) into the arena, and sets l.off and l.end.
func (p *eventPageBuf) render(l *eventLine, st *statemachine.State) error {
	c := l.change
	topic, typ := topicOf(c.Kind)
	var t *statemachine.Task
	if st != nil && topic == "task" {
		t = st.Task(c.Task)
	}
	start := p.arena.Len()
	if t != nil {
		if b, ok := appendTaskEvent(p.arena.AvailableBuffer(), int(c.Group), c.Index, typ, st, t); ok {
			p.arena.Write(b) // in place, unless b outgrew the arena's room
			l.off, l.end = start+len(emptyIndex), p.arena.Len()
			return nil
		}
	}
	ev := &p.ev
	*ev = client.Event{Group: int(c.Group), Raft: c.Index, Topic: topic, Type: typ}
	switch topic {
	case "task":
		ev.Key = strconv.FormatUint(uint64(c.Task), 10)
	case "service":
		ev.Key = fmt.Sprintf("%d:%d", c.Group, c.Service)
	case "node":
		ev.Key = strconv.FormatUint(uint64(c.Node), 10)
	}
	if st != nil {
		switch topic {
		case "task":
			if t != nil {
				renderTaskTo(&p.task, st, t, false)
				ev.Task = &p.task
				ev.Key = p.task.ID // the same decimal ID
			}
		case "service":
			if svc := st.Service(c.Service); svc != nil {
				p.svc = renderService(int(c.Group), st, svc)
				ev.Service = &p.svc
				ev.Key = svc.Spec.Name
			}
		case "node":
			if n := st.Node(c.Node); n != nil {
				p.node = renderNode(n)
				ev.Node = &p.node
			} else {
				ev.Type = "deleted"
			}
		}
	}
	if err := p.enc.Encode(ev); err != nil {
		p.arena.Truncate(start)
		return err
	}
	l.off, l.end = start+len(emptyIndex), p.arena.Len()
	return nil
}

// eventCache keeps the renders of recent changes (eventLine's part after
// the index), each with the applied index of its group's state it was
// rendered from, so that a stream reading a change at the same state as
// another did takes its bytes instead of rendering them again. A group's
// state at a given applied index is one state (whatever changes it is an
// applied entry, which moves the index), so the bytes are what the stream
// would have rendered. The cache keeps renders only while more than one
// stream is open (a lone stream never reads a change twice), the last
// eventCacheKeep to 2*eventCacheKeep of them.
//
// Its lock is taken under a group's read lock (the renders are made
// there) and nothing is taken under it.
type eventCache struct {
	streams atomic.Int64
	mu      struct {
		sync.Mutex
		cur, old map[control.Change]eventSlot // old: the generation before cur
		hits     uint64                       // renders taken from the cache
	}
}

// eventCacheKeep is how many renders make a generation of the cache: a
// page of events.
const eventCacheKeep = eventPage

type eventSlot struct {
	stamp uint64 // the group's applied index when rendered
	bytes []byte // never changed once kept
}

func (k *eventCache) opened() { k.streams.Add(1) }

// closed forgets the renders once at most one stream is left.
func (k *eventCache) closed() {
	if k.streams.Add(-1) <= 1 {
		k.mu.Lock()
		k.mu.cur, k.mu.old = nil, nil
		k.mu.Unlock()
	}
}

// sharing says whether renders are to be kept.
func (k *eventCache) sharing() bool { return k.streams.Load() > 1 }

// get returns c's render at stamp, or nil.
func (k *eventCache) get(c control.Change, stamp uint64) []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	sl, ok := k.mu.cur[c]
	if !ok {
		sl, ok = k.mu.old[c]
	}
	if ok && sl.stamp == stamp && stamp != 0 {
		k.mu.hits++
		return sl.bytes
	}
	return nil
}

// put keeps a copy of b as c's render at stamp. Nothing is kept at stamp
// 0 (a state applied to without indexes).
func (k *eventCache) put(c control.Change, stamp uint64, b []byte) {
	if stamp == 0 {
		return
	}
	kept := bytes.Clone(b)
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.sharing() {
		return // a stream closed meanwhile (closed clears under the lock after its count)
	}
	if k.mu.cur == nil || len(k.mu.cur) >= eventCacheKeep {
		k.mu.old, k.mu.cur = k.mu.cur, make(map[control.Change]eventSlot, eventCacheKeep)
	}
	k.mu.cur[c] = eventSlot{stamp: stamp, bytes: kept}
}
