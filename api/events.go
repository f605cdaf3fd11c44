package api

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/api/client"
	"shoal/internal/jsoncodec"
	"shoal/manager/control"
	"shoal/statemachine"
	"shoal/wire"
)

// eventHeartbeat is how often an idle stream gets a heartbeat line.
const eventHeartbeat = 10 * time.Second

// eventPage is the most events a stream takes from the feed at once.
const eventPage = 8192

// partBytes is the size a stream aims the parts of a page at. A part is
// rendered and its lines written as one chunk: its groups' states are read
// once for it, under read locks that wait for the applies in progress (so
// a stream catching up takes those locks once per few hundred events
// rather than once per event), and its lines and renders are buffered
// until it is written. A stream keeps its buffers from part to part only
// while they stay under keepBuffer: whole pages of eventPage events (up to
// megabytes in a ramp, where a hundred groups make every line's resume
// token a few hundred bytes) grew both buffers from nothing on every page,
// which cost a stream about half its rendering. Half of keepBuffer leaves
// room for a part whose events are larger than the last one's.
const partBytes = keepBuffer / 2

// minPart is the fewest events a part has.
const minPart = 16

// topicOf names an effect's topic and type.
func topicOf(k statemachine.EffectKind) (topic, typ string) {
	switch k {
	case statemachine.EffTaskState:
		return "task", "state"
	case statemachine.EffAssignments:
		return "task", "assignment"
	case statemachine.EffTaskDesired:
		return "task", "desired"
	case statemachine.EffSeqAdvanced:
		return "task", "released"
	case statemachine.EffTaskDeleted:
		return "task", "deleted"
	case statemachine.EffServiceChanged:
		return "service", "changed"
	case statemachine.EffServiceDeleted:
		return "service", "deleted"
	case statemachine.EffNodeChanged:
		return "node", "changed"
	}
	return "", ""
}

func (s *Server) events(ctx *fasthttp.RequestCtx, _ []string) error {
	topics := map[string]bool{}
	if v := string(ctx.QueryArgs().Peek("topic")); v != "" {
		for _, t := range strings.Split(v, ",") {
			switch t {
			case "service", "task", "node":
				topics[t] = true
			default:
				return badRequest("?topic=%q: topics are service, task and node (comma-separated)", t)
			}
		}
	}
	if err := s.readHeaders(ctx); err != nil {
		return err
	}
	cursor := wire.Cursor(s.cfg.Feed.Applied())
	if tok := string(ctx.QueryArgs().Peek("index")); tok != "" {
		c, err := wire.ParseCursor(tok)
		if err != nil {
			return badRequest("?index=%q is not an index this API gave out", tok)
		}
		cursor = c
	}
	if _, _, ok := s.cfg.Feed.Since(cursor, 0); !ok {
		return errorf(fasthttp.StatusGone, client.CodeIndexTooOld,
			"events up to that index are no longer kept on this manager; read the current state (it carries X-Shoal-Index) and follow events from there")
	}
	ctx.SetContentType("application/x-ndjson")
	ctx.Response.Header.Set("X-Shoal-Index", cursor.Token())
	// The client learns at once that the stream is open, not at the
	// first event or heartbeat.
	ctx.Response.ImmediateHeaderFlush = true
	ctx.Response.SetBodyStream(&eventStream{s: s, cursor: cursor, topics: topics}, -1)
	return nil
}

// eventStream is the body of an event stream. The server's connection
// goroutine writes it (WriteTo), each part of a page of events as one
// chunk: no pipe and no goroutine of its own, so a busy manager hands the
// stream over to the connection once per part (about partBytes), not once
// per few kilobytes.
type eventStream struct {
	s      *Server
	cursor wire.Cursor
	topics map[string]bool
	from   uint64 // where the next page's scan of the ring starts
	limit  int    // the most events per page (0: eventPage)
	part   int    // the most events per part (0: partLen's)
	// perEvent is the bytes per event of the last part (0: none yet): the
	// next part has as many events as make partBytes at that rate.
	perEvent int
	page     eventPageBuf
	changes  []control.Change // the last page's, for its room
	run      tokenRun
}

// Read is never used: the server writes the stream with WriteTo.
func (*eventStream) Read([]byte) (int, error) {
	return 0, errors.New("api: the event stream is written with WriteTo")
}

// SupportsBodyWriteTo tells the server to write the stream with WriteTo.
func (*eventStream) SupportsBodyWriteTo() bool { return true }

// WriteTo writes events after the cursor until the client goes away or
// the server closes.
func (es *eventStream) WriteTo(w io.Writer) (int64, error) {
	out := newJSONLines(w)
	enc, send := out.enc, out.send
	s := es.s
	s.eventLines.opened()
	defer s.eventLines.closed()
	beat := time.NewTicker(eventHeartbeat)
	defer beat.Stop()
	for {
		_, changed := s.cfg.Feed.Changed()
		some, ok, err := es.next(&out.buf, send)
		if err != nil {
			return out.total, err
		}
		if !ok {
			_ = enc.Encode(client.Event{Topic: "error", Error: &client.ErrorBody{Code: client.CodeIndexTooOld,
				Error: "this stream fell behind further than the manager keeps events; read the current state and follow events from there"}})
			err := send()
			return out.total, err
		}
		if some {
			if err := send(); err != nil {
				return out.total, err
			}
			continue
		}
		select {
		case <-changed:
		case <-beat.C:
			if err := enc.Encode(client.Event{Topic: "heartbeat", Index: es.cursor.Token()}); err != nil {
				return out.total, err
			}
			if err := send(); err != nil {
				return out.total, err
			}
		case <-s.closed:
			return out.total, nil
		}
	}
}

// next appends the lines of the next page of events after the stream's
// cursor to buf and moves the cursor past them. some says the feed had
// changes after the cursor (all of them may be of topics the stream does
// not follow: it then appends nothing); ok is false if the feed no longer
// reaches back to the cursor. The page is rendered in parts of about
// partBytes, and between two parts flush (nil: none) writes what buf
// holds: however many events a page has (one entry's are never split
// across pages, and one entry may hold thousands), a stream's buffers stay
// small, and keep their room.
func (es *eventStream) next(buf *bytes.Buffer, flush func() error) (some, ok bool, err error) {
	limit := es.limit
	if limit == 0 {
		limit = eventPage
	}
	changes, next, end, ok := es.s.cfg.Feed.PageInto(es.changes, es.cursor, limit, es.from)
	es.from = end
	if changes != nil {
		es.changes = changes // its room, for the next page
	}
	if !ok || len(changes) == 0 {
		return false, ok, nil
	}
	es.run.start(es.cursor)
	for lo := 0; lo < len(changes); {
		if lo > 0 && flush != nil {
			if err := flush(); err != nil {
				return false, true, err
			}
		}
		hi := min(len(changes), lo+es.partLen())
		before := buf.Len()
		if err := es.s.renderEvents(buf, &es.page, changes, lo, hi, es.topics, &es.run); err != nil {
			return false, true, err
		}
		// Events the stream does not follow count too (they cost nothing
		// here, and a part of them lets the next part have more).
		es.perEvent = max((buf.Len()-before)/(hi-lo), 1)
		lo = hi
	}
	es.cursor = next
	return true, true, nil
}

// partLen is how many events the next part of a page has: as many as make
// partBytes at the last part's bytes per event, at least minPart; before
// the first part, as many as make partBytes at a kilobyte each. A part may
// still outgrow keepBuffer (its events larger than the last part's): the
// buffers then let their room go after it (resetKeepingLittle).
func (es *eventStream) partLen() int {
	per := es.perEvent
	if per == 0 {
		per = 1 << 10
	}
	n := max(minPart, partBytes/per)
	if es.part > 0 {
		n = min(n, es.part)
	}
	return n
}

// resumeTokens returns, for each change, the cursor token a reader that
// got it resumes from. A cursor counts whole entries, so only an entry's
// last change may resume after the entry: the others resume at the entry's
// start, and a reader cut off in the middle of an entry gets all of it
// again (an event may come twice; none is lost).
func resumeTokens(changes []control.Change, start wire.Cursor) []string {
	var r tokenRun
	r.start(start)
	buf, spans := r.append(nil, nil, changes, 0, len(changes), nil)
	out := make([]string, len(spans))
	for i, sp := range spans {
		out[i] = string(buf[sp.off:sp.end])
	}
	return out
}

// span is where a token lies in a buffer.
type span struct{ off, end int }

// tokenRun makes the resume tokens of a page's changes, part after part.
type tokenRun struct {
	run   wire.Cursor // the cursor after the changes so far
	tok   span        // run's token, in the buffer of the last append
	stale bool        // tok is not run's
}

// start readies r for a page of changes after cursor.
func (r *tokenRun) start(cursor wire.Cursor) {
	r.run = append(r.run[:0], cursor...)
	r.stale = true
}

// append is resumeTokens for changes[lo:hi] (the run having gone through
// changes[:lo]) and for the changes follow says the reader follows (nil:
// all): it appends their tokens to buf and, for each of them in order,
// where its token lies in buf. A token is written once per entry and
// buffer (not per change), and only when a change the reader follows
// needs it: the cursor moves only at an entry's end, and with a hundred
// groups a token is a few hundred bytes.
func (r *tokenRun) append(buf []byte, spans []span, changes []control.Change, lo, hi int, follow func(control.Change) bool) ([]byte, []span) {
	r.stale = true // tok was in another buffer
	for i := lo; i < hi; i++ {
		c := changes[i]
		for len(r.run) <= int(c.Group) {
			r.run = append(r.run, 0)
			r.stale = true
		}
		ends := i+1 == len(changes) || changes[i+1].Group != c.Group || changes[i+1].Index != c.Index
		if ends && c.Index > r.run[c.Group] {
			r.run[c.Group] = c.Index
			r.stale = true
		}
		if follow != nil && !follow(c) {
			continue
		}
		if r.stale {
			r.tok.off = len(buf)
			buf = r.run.AppendToken(buf)
			r.tok.end, r.stale = len(buf), false
		}
		spans = append(spans, r.tok)
	}
	return buf, spans
}

// jsonLines buffers the JSON lines of a streamed answer (events, logs) and
// counts the bytes it sent.
type jsonLines struct {
	w     io.Writer
	buf   bytes.Buffer
	enc   *jsoncodec.Encoder
	total int64
}

func newJSONLines(w io.Writer) *jsonLines {
	l := &jsonLines{w: w}
	l.enc = jsoncodec.NewEncoder(&l.buf)
	return l
}

// send writes what is buffered.
func (l *jsonLines) send() error {
	n, err := l.w.Write(l.buf.Bytes())
	l.total += int64(n)
	resetKeepingLittle(&l.buf)
	return err
}

// keepBuffer is the most room a stream keeps in a buffer between pages: a
// page of thousands of events grows one to megabytes, which a stream open
// for days would otherwise hold the whole time (the encoders keep a
// pointer to the buffer, not to its bytes, so it can be replaced).
const keepBuffer = 256 << 10

// resetKeepingLittle empties b, and lets its room go when it grew past
// keepBuffer.
func resetKeepingLittle(b *bytes.Buffer) {
	if b.Cap() > keepBuffer {
		*b = bytes.Buffer{}
		return
	}
	b.Reset()
}
