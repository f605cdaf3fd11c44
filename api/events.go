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

// eventPage is the most events a stream renders and writes at once. Each
// page reads each of its groups' states once, under read locks that wait
// for the applies in progress, so a stream catching up takes those locks
// once per page rather than once per event.
const eventPage = 8192

// pageBytes is the size a stream aims its pages at. A page's lines and its
// renders are buffered until the page is written, and a stream keeps its
// buffers from page to page only while they stay under keepBuffer: pages of
// eventPage events (up to megabytes in a ramp, where a hundred groups make
// every line's resume token a few hundred bytes) grew both buffers from
// nothing on every page, which cost a stream about half its rendering.
// Half of keepBuffer leaves room for a page whose events are larger than
// the last one's.
const pageBytes = keepBuffer / 2

// minPage is the fewest events a stream asks for at once (a page has more
// when one entry's events are more: pages never split an entry).
const minPage = 16

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
// goroutine writes it (WriteTo), each page of events as one chunk: no
// pipe and no goroutine of its own, so a busy manager hands the stream
// over to the connection once per page, not once per few kilobytes.
type eventStream struct {
	s      *Server
	cursor wire.Cursor
	topics map[string]bool
	from   uint64 // where the next page's scan of the ring starts
	limit  int    // the most events per page (0: eventPage)
	// perEvent is the bytes per event of the last page that had any
	// (0: none yet): the next page asks for as many events as make
	// pageBytes at that rate.
	perEvent int
	page     eventPageBuf
	changes  []control.Change // the last page's, for its room
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
		some, ok, err := es.next(&out.buf)
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
// reaches back to the cursor.
func (es *eventStream) next(buf *bytes.Buffer) (some, ok bool, err error) {
	changes, next, end, ok := es.s.cfg.Feed.PageInto(es.changes, es.cursor, es.pageLimit(), es.from)
	es.from = end
	if changes != nil {
		es.changes = changes // its room, for the next page
	}
	if !ok || len(changes) == 0 {
		return false, ok, nil
	}
	before := buf.Len()
	if err := es.s.renderEvents(buf, &es.page, changes, es.topics, es.cursor); err != nil {
		return false, true, err
	}
	es.cursor = next
	// Events the stream does not follow count too (they cost nothing
	// here, and a page of them lets the next page ask for more).
	es.perEvent = max((buf.Len()-before)/len(changes), 1)
	return true, true, nil
}

// pageLimit is how many events the stream asks for next: as many as make
// pageBytes at the last page's bytes per event, between minPage and the
// stream's limit; before the first page, as many as make pageBytes at a
// kilobyte each. A page may still outgrow keepBuffer (its events larger
// than the last page's, or one entry's events more than the limit): the
// buffers then let their room go after it (resetKeepingLittle).
func (es *eventStream) pageLimit() int {
	most := es.limit
	if most == 0 {
		most = eventPage
	}
	per := es.perEvent
	if per == 0 {
		per = 1 << 10
	}
	return min(most, max(minPage, pageBytes/per))
}

// resumeTokens returns, for each change, the cursor token a reader that
// got it resumes from. A cursor counts whole entries, so only an entry's
// last change may resume after the entry: the others resume at the entry's
// start, and a reader cut off in the middle of an entry gets all of it
// again (an event may come twice; none is lost).
func resumeTokens(changes []control.Change, start wire.Cursor) []string {
	buf, spans := appendResumeTokens(nil, nil, changes, start, nil)
	out := make([]string, len(spans))
	for i, sp := range spans {
		out[i] = string(buf[sp.off:sp.end])
	}
	return out
}

// span is where a token lies in a buffer.
type span struct{ off, end int }

// appendResumeTokens is resumeTokens for the changes follow says the
// reader follows (nil: all): it appends their tokens to buf and, for each
// of them in order, where its token lies in buf. A token is written once
// per entry (not per change), and only when a change the reader follows
// needs it: the cursor moves only at an entry's end, and with a hundred
// groups a token is a few hundred bytes.
func appendResumeTokens(buf []byte, spans []span, changes []control.Change, start wire.Cursor, follow func(control.Change) bool) ([]byte, []span) {
	run := append(wire.Cursor(nil), start...)
	var tok span
	stale := true
	for i, c := range changes {
		for len(run) <= int(c.Group) {
			run = append(run, 0)
			stale = true
		}
		ends := i+1 == len(changes) || changes[i+1].Group != c.Group || changes[i+1].Index != c.Index
		if ends && c.Index > run[c.Group] {
			run[c.Group] = c.Index
			stale = true
		}
		if follow != nil && !follow(c) {
			continue
		}
		if stale {
			tok.off = len(buf)
			buf = run.AppendToken(buf)
			tok.end, stale = len(buf), false
		}
		spans = append(spans, tok)
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
