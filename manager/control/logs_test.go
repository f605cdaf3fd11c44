package control

import (
	"errors"
	"strings"
	"testing"
	"time"

	"shoal/statemachine"
	"shoal/wire"
)

var t0 = time.Unix(1_767_225_600, 0)

// A hundred followers that never read: what the broker buffers stays
// within the bound per subscription and the bound for all, publishing
// never waits, and each reader, when it reads at last, is told how many
// lines it lost — every published line is either taken or counted dropped.
func TestLogBrokerBoundsFollowersThatNeverRead(t *testing.T) {
	const subs, batches, perBatch = 100, 40, 10
	cfg := LogConfig{PerSubscription: 32 << 10, Total: 1 << 20, MaxSubscriptions: subs}
	b := NewLogBroker(cfg)
	line := strings.Repeat("x", 100)
	open := make([]*LogSub, subs)
	for i := range open {
		s, err := b.Open(uint64(i+1), map[statemachine.TaskID]statemachine.NodeID{statemachine.TaskID(i + 1): 7}, true)
		if err != nil {
			t.Fatal(err)
		}
		open[i] = s
	}
	if _, err := b.Open(999, nil, true); !errors.Is(err, ErrTooManyLogSubscriptions) {
		t.Fatalf("subscription %d of %d: %v, want refused", subs+1, subs, err)
	}
	peak := 0
	for i := range open { // one follower's lines after another's: the first ones would fill the bound for all
		for range batches {
			batch := &wire.LogBatch{NodeID: 7, Sub: uint64(i + 1)}
			for range perBatch {
				batch.Lines = append(batch.Lines, wire.LogLine{Task: statemachine.TaskID(i + 1), Stream: wire.LogStdout, Data: line})
			}
			if stop, err := b.Publish(7, batch); stop || err != nil {
				t.Fatalf("publish: stop=%v err=%v", stop, err)
			}
			peak = max(peak, b.Buffered())
			if got := b.Buffered(); got > cfg.Total {
				t.Fatalf("%d bytes buffered, over the bound of %d for all", got, cfg.Total)
			}
		}
	}
	t.Logf("%d followers, %d lines each published: at most %d bytes buffered (bound %d)", subs, batches*perBatch, peak, cfg.Total)
	var taken, lost uint64
	for i, s := range open {
		got, dropped, finished := s.Take()
		taken, lost = taken+uint64(len(got)), lost+uint64(dropped)
		size := 0
		for _, e := range got {
			size += len(e.Data) + entryOverhead
		}
		if size > cfg.PerSubscription {
			t.Fatalf("subscription %d held %d bytes, over its bound of %d", i+1, size, cfg.PerSubscription)
		}
		if len(got)+dropped != batches*perBatch || dropped == 0 || finished {
			t.Fatalf("subscription %d: %d lines taken, %d dropped, finished %v; want %d in all, some dropped, not finished",
				i+1, len(got), dropped, finished, batches*perBatch)
		}
	}
	if got := b.Buffered(); got != 0 {
		t.Fatalf("%d bytes still buffered after every reader took its lines", got)
	}
	// The broker's counts (the metrics) say the same as its readers were told.
	if st := b.Stats(); st.Lines != taken || st.Dropped != lost || st.Subscriptions != subs || st.Buffered != 0 {
		t.Fatalf("stats %+v; the readers took %d lines and were told of %d dropped, %d subscriptions", st, taken, lost, subs)
	}
	open[0].Close()
	if stop, err := b.Publish(7, &wire.LogBatch{NodeID: 7, Sub: 1}); !stop || err != nil {
		t.Fatalf("a batch for a closed subscription: stop=%v err=%v, want stop", stop, err)
	}
}

// A node publishes only its own tasks' output: a batch naming another
// node's task is refused whole.
func TestLogBrokerRefusesAnotherNodesTask(t *testing.T) {
	b := NewLogBroker(LogConfig{})
	s, _ := b.Open(1, map[statemachine.TaskID]statemachine.NodeID{10: 1, 20: 2}, false)
	_, err := b.Publish(2, &wire.LogBatch{NodeID: 2, Sub: 1, Lines: []wire.LogLine{
		{Task: 20, Stream: wire.LogStdout, Data: "mine"}, {Task: 10, Stream: wire.LogStdout, Data: "not mine"}}})
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeForbidden {
		t.Fatalf("publish of another node's task: %v, want forbidden", err)
	}
	if got, _, _ := s.Take(); len(got) != 0 {
		t.Fatalf("a refused batch left %d lines", len(got))
	}
}

// Without follow a subscription finishes once every node said done or
// was given up; the given-up node is named in a note.
func TestLogSubFinishes(t *testing.T) {
	b := NewLogBroker(LogConfig{})
	s, _ := b.Open(1, map[statemachine.TaskID]statemachine.NodeID{10: 1, 20: 2}, false)
	if _, err := b.Publish(1, &wire.LogBatch{NodeID: 1, Sub: 1, Lines: []wire.LogLine{{Task: 10, Stream: wire.LogStdout, Data: "a"}}, Done: true}); err != nil {
		t.Fatal(err)
	}
	if waiting, silent := s.Nodes(); len(waiting) != 1 || waiting[0] != 2 || len(silent) != 1 {
		t.Fatalf("waiting %v, silent %v; want node 2 in both", waiting, silent)
	}
	if _, _, finished := s.Take(); finished {
		t.Fatal("finished while node 2 has not answered")
	}
	s.NodeGone(2, "node 2 is down", t0)
	got, _, finished := s.Take()
	if !finished || len(got) != 1 || got[0].Stream != wire.LogNote || got[0].Node != 2 {
		t.Fatalf("after node 2 was given up: %+v finished %v; want its note and the end", got, finished)
	}
}

// Notices: a manager hands a notice to each node it names once per
// round, wakes the node's poll when one arrives, and forgets it when it
// ends or is not renewed for NoticeTTL.
func TestLogNotices(t *testing.T) {
	b := NewLogBroker(LogConfig{NoticeTTL: 10 * time.Second})
	wake := b.NoticeWake(1)
	n := Notice{ID: 5, Publish: "m2:7946", Follow: true, Tail: -1,
		Nodes: map[statemachine.NodeID][]statemachine.TaskID{1: {10}, 2: {20, 21}}}
	if err := b.PutNotice(n, t0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	default:
		t.Fatal("a notice for node 1 did not wake its poll")
	}
	got := b.TakeNotices(2, t0)
	if len(got) != 1 || got[0].ID != 5 || got[0].Publish != "m2:7946" || len(got[0].Tasks) != 2 || !got[0].Follow {
		t.Fatalf("node 2 was handed %+v", got)
	}
	if again := b.TakeNotices(2, t0); len(again) != 0 {
		t.Fatalf("node 2 was handed the same round twice: %+v", again)
	}
	if !b.HasNotices(1, t0) {
		t.Fatal("node 1 has not had the notice yet")
	}
	n.Round++ // the holder asks for it to be handed again
	_ = b.PutNotice(n, t0.Add(5*time.Second))
	if again := b.TakeNotices(2, t0.Add(5*time.Second)); len(again) != 1 {
		t.Fatalf("a new round was not handed to node 2: %+v", again)
	}
	if b.HasNotices(2, t0.Add(15*time.Second)) || b.Notices(t0.Add(15*time.Second)) != 0 {
		t.Fatal("a notice outlived its TTL without a renewal")
	}
	_ = b.PutNotice(n, t0)
	b.EndNotice(5)
	if b.HasNotices(1, t0) || b.Notices(t0) != 0 {
		t.Fatal("an ended notice is still handed out")
	}
}
