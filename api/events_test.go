package api

import (
	"bytes"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	"pgregory.net/rapid"

	"shoal/manager/control"
	"shoal/statemachine"
	"shoal/wire"
)

// Property: a reader that resumes from the token of any event it got loses
// no later event, and is sent again at most the events of that event's own
// entry (a cursor counts whole entries).
func TestResumeTokensLoseNothing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		groups := rapid.IntRange(1, 3).Draw(t, "groups")
		f := control.NewFeed(groups, nil, 1024, 16)
		next := make([]uint64, groups+1)
		for range rapid.IntRange(1, 40).Draw(t, "entries") {
			g := rapid.IntRange(0, groups).Draw(t, "group")
			next[g]++
			effs := make([]statemachine.Effect, rapid.IntRange(1, 5).Draw(t, "effects"))
			for i := range effs {
				effs[i] = statemachine.Effect{Kind: statemachine.EffTaskState, Task: statemachine.TaskID(next[g]*10 + uint64(i))}
			}
			f.OnApply(g, next[g], effs)
		}
		all, _, _ := f.Since(nil, 1<<20)
		tokens := resumeTokens(all, nil)
		k := rapid.IntRange(0, len(all)-1).Draw(t, "cut after event")
		cur, err := wire.ParseCursor(tokens[k])
		if err != nil {
			t.Fatalf("token %q: %v", tokens[k], err)
		}
		again, _, ok := f.Since(cur, 1<<20)
		if !ok {
			t.Fatal("the ring holds everything, yet the token is too old")
		}
		rest := all[k+1:]
		if len(again) < len(rest) {
			t.Fatalf("resumed after event %d of %d: got %d events, %d came after it", k, len(all), len(again), len(rest))
		}
		for i, c := range rest {
			if got := again[len(again)-len(rest)+i]; got.Task != c.Task {
				t.Fatalf("resumed after event %d: event %d is task %d, want %d", k, i, got.Task, c.Task)
			}
		}
		for _, c := range again[:len(again)-len(rest)] {
			if c.Group != all[k].Group || c.Index != all[k].Index {
				t.Fatalf("resumed after event %d (entry %d/%d): got event of entry %d/%d again", k, all[k].Group, all[k].Index, c.Group, c.Index)
			}
		}
	})
}

// An event stream asked to resume from before the oldest change the feed
// keeps is refused with 410 index_too_old, not resumed with a gap; one
// from a change it keeps opens.
func TestEventsRefuseAnIndexTooOld(t *testing.T) {
	r := &replica{st: statemachine.New(statemachine.Config{}), leader: 1}
	f := control.NewFeed(1, nil, 1024, 16) // the ring keeps the last 1,024 changes
	s, err := New(Config{Reads: r, Leaders: r, Self: r, Replicas: r, Stats: r, ToGroup: r, Submitter: r, Feed: f})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := wire.Cursor(f.Applied()).Token()
	for i := uint64(1); i <= 1500; i++ {
		f.OnApply(1, i, []statemachine.Effect{{Kind: statemachine.EffTaskState, Task: statemachine.TaskID(i)}})
	}
	get := func(index string) (int, string) {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("GET")
		ctx.Request.SetRequestURI("/v1/events?index=" + index)
		s.handle(&ctx)
		if ctx.Response.IsBodyStream() {
			return ctx.Response.StatusCode(), "(a stream)" // it runs until the server closes
		}
		return ctx.Response.StatusCode(), string(ctx.Response.Body())
	}
	if status, body := get(start); status != fasthttp.StatusGone || !strings.Contains(body, `"code":"index_too_old"`) {
		t.Fatalf("events from before the kept changes: %d %s; want 410 index_too_old", status, body)
	}
	if status, body := get(wire.Cursor{0, 1000}.Token()); status != fasthttp.StatusOK {
		t.Fatalf("events from a kept change: %d %s; want 200", status, body)
	}
}

// A stream's buffers do not keep the room a big page grew them to: after
// a page of megabytes, what stays between pages is bounded, and a small
// buffer keeps its room (no allocation per page).
func TestStreamBuffersLetBigPagesGo(t *testing.T) {
	var sink bytes.Buffer
	l := newJSONLines(&sink)
	l.buf.Write(bytes.Repeat([]byte("x"), 8<<20))
	if err := l.send(); err != nil {
		t.Fatal(err)
	}
	if c := l.buf.Cap(); c > keepBuffer {
		t.Fatalf("the line buffer keeps %d bytes of room after a page of 8 MiB, want at most %d", c, keepBuffer)
	}
	if err := l.enc.Encode(map[string]int{"a": 1}); err != nil || l.buf.String() != "{\"a\":1}\n" {
		t.Fatalf("the encoder no longer writes to the stream's buffer: %q, %v", l.buf.String(), err)
	}
	l.buf.Reset()
	l.buf.Grow(1024)
	small := l.buf.Cap()
	l.buf.WriteString("line\n")
	if err := l.send(); err != nil || l.buf.Cap() != small {
		t.Fatalf("a small buffer's room went: cap %d, want %d (%v)", l.buf.Cap(), small, err)
	}
	if sink.Len() != 8<<20+len("line\n") {
		t.Fatalf("%d bytes sent", sink.Len())
	}
}
