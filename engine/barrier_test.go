package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4"

	"shoal/statemachine"
)

// TestTemporaryIsDragonboats: the engine's cheap check says what
// dragonboat.IsTempError says of every error dragonboat exports, as
// returned and wrapped, and of the errors a read meets besides.
func TestTemporaryIsDragonboats(t *testing.T) {
	errs := []error{
		dragonboat.ErrClosed, dragonboat.ErrShardNotFound, dragonboat.ErrShardAlreadyExist,
		dragonboat.ErrShardNotStopped, dragonboat.ErrInvalidShardSettings, dragonboat.ErrShardNotBootstrapped,
		dragonboat.ErrDeadlineNotSet, dragonboat.ErrInvalidDeadline, dragonboat.ErrDirNotExist,
		dragonboat.ErrInvalidOption, dragonboat.ErrInvalidOperation, dragonboat.ErrInvalidAddress,
		dragonboat.ErrInvalidSession, dragonboat.ErrTimeoutTooSmall, dragonboat.ErrPayloadTooBig,
		dragonboat.ErrSystemBusy, dragonboat.ErrShardClosed, dragonboat.ErrShardNotInitialized,
		dragonboat.ErrTimeout, dragonboat.ErrCanceled, dragonboat.ErrRejected, dragonboat.ErrAborted,
		dragonboat.ErrShardNotReady, dragonboat.ErrInvalidTarget,
		errLeaderChanged, context.DeadlineExceeded, context.Canceled, ErrClosed, ErrTimeout,
		errors.New("something else"),
	}
	for _, err := range errs {
		for _, e := range []error{err, fmt.Errorf("wrapped: %w", err), fmt.Errorf("twice: %w", fmt.Errorf("once: %w", err))} {
			if got, want := temporary(e), dragonboat.IsTempError(e); got != want {
				t.Errorf("temporary(%q) = %v, dragonboat says %v", e, got, want)
			}
		}
	}
}

// BenchmarkTemporary: what deciding whether a read's error is worth a
// retry costs, for a dropped read (temporary) and a deadline (not).
func BenchmarkTemporary(b *testing.B) {
	for _, err := range []error{dragonboat.ErrShardNotReady, context.DeadlineExceeded} {
		b.Run("dragonboat/"+err.Error(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = dragonboat.IsTempError(err)
			}
		})
		b.Run("engine/"+err.Error(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = temporary(err)
			}
		})
	}
}

// followerOf returns a replica that does not lead group g.
func followerOf(t testing.TB, l *Local, g int) *Engine {
	t.Helper()
	for _, e := range l.Engines() {
		if id, ok := e.Leader(g); ok && id != e.ReplicaID() {
			return e
		}
	}
	t.Fatalf("no follower of group %d", g)
	return nil
}

// leaderOf returns the replica that leads group g.
func leaderOf(t testing.TB, l *Local, g int) *Engine {
	t.Helper()
	for _, e := range l.Engines() {
		if id, ok := e.Leader(g); ok && id == e.ReplicaID() {
			return e
		}
	}
	t.Fatalf("no leader of group %d", g)
	return nil
}

// TestReadsSeeEveryWriteBeforeThem: reads on a follower that share
// barriers still see every write acknowledged before they began (an end
// to end check; the race it looks for is narrow, so the rules are pinned
// by TestReadWaitsForABarrierAskedAfterIt). A writer
// creates services one after another on the leader; readers on a
// follower note how many were acknowledged, then read, and must find at
// least that many.
func TestReadsSeeEveryWriteBeforeThem(t *testing.T) {
	l := startLocal(t, 3, testConfig(1))
	leader, follower := leaderOf(t, l, 1), followerOf(t, l, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var acked atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(stop)
		// Paced: with no entry right behind it, a write's commit reaches
		// the follower with the next heartbeat, so a read that used a
		// barrier asked before the write committed would miss it.
		pace := time.NewTicker(5 * time.Millisecond)
		defer pace.Stop()
		for i := 1; i <= 200; i++ {
			<-pace.C
			if _, err := leader.Submit(ctx, statemachine.Command{Kind: statemachine.CmdCreateService,
				Spec: &statemachine.ServiceSpec{Name: fmt.Sprintf("s-%d", i), Replicas: 0}}); err != nil {
				t.Errorf("write %d: %v", i, err)
				return
			}
			acked.Store(int64(i))
		}
	}()
	var reads, stale atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				before := acked.Load()
				var seen int64
				if err := follower.Read(ctx, 1, func(s *statemachine.State) { seen = int64(len(s.ServiceIDs())) }); err != nil {
					t.Errorf("read: %v", err)
					return
				}
				reads.Add(1)
				if seen < before {
					if stale.Add(1) <= 3 {
						t.Errorf("a read begun after %d writes were acknowledged saw %d services", before, seen)
					}
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d reads, %d barriers, %d stale", reads.Load(), follower.reads.asked.Load(), stale.Load())
}

// TestConcurrentReadsShareBarriers: many reads of a group at once ask for
// far fewer read indexes than there are reads.
func TestConcurrentReadsShareBarriers(t *testing.T) {
	l := startLocal(t, 3, testConfig(1))
	follower := followerOf(t, l, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const readers, each = 64, 20
	before := follower.reads.asked.Load()
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if err := follower.Read(ctx, 1, func(*statemachine.State) {}); err != nil {
					t.Errorf("read: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	asked := follower.reads.asked.Load() - before
	t.Logf("%d reads asked for %d read indexes", readers*each, asked)
	if asked == 0 || asked > readers*each/4 {
		t.Fatalf("%d reads asked for %d read indexes; want at least one and at most a quarter", readers*each, asked)
	}
}

// fakeBarriers runs barriers whose asks the test answers: each ask
// arrives on the channel returned and ends with what is sent on its
// answer channel.
type fakeAsk struct {
	g      int
	b      *barrier
	answer chan error
}

func fakeBarriers(t *testing.T, overlapAfter time.Duration) (*barriers, chan fakeAsk) {
	asks := make(chan fakeAsk, 16)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	quit := make(chan struct{})
	t.Cleanup(func() { close(quit) }) // runs first: asks left unanswered end
	bs := &barriers{groups: make([]barrierGroup, 2), overlapAfter: overlapAfter,
		ask: func(g int, b *barrier) error {
			a := fakeAsk{g: g, b: b, answer: make(chan error)}
			select {
			case asks <- a:
			case <-quit:
				return dragonboat.ErrClosed
			}
			select {
			case err := <-a.answer:
				return err
			case <-quit:
				return dragonboat.ErrClosed
			}
		},
		spawn: func(f func()) bool {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f()
			}()
			return true
		}}
	return bs, asks
}

func nextAsk(t *testing.T, asks chan fakeAsk) fakeAsk {
	t.Helper()
	select {
	case a := <-asks:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no barrier asked for")
		return fakeAsk{}
	}
}

func noAsk(t *testing.T, asks chan fakeAsk, when string) {
	t.Helper()
	select {
	case a := <-asks:
		t.Fatalf("%s: a barrier of group %d was asked for", when, a.g)
	default:
	}
}

func ended(b *barrier) bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

func waitEnded(t *testing.T, b *barrier) {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		t.Fatal("barrier did not end")
	}
}

// TestReadWaitsForABarrierAskedAfterIt: a read that arrives while a
// barrier is in flight waits for the next one, asked when that ends and
// shared by every read that arrived meanwhile; a barrier's error reaches
// its readers; with none in flight a read asks at once.
func TestReadWaitsForABarrierAskedAfterIt(t *testing.T) {
	bs, asks := fakeBarriers(t, time.Hour)
	b1 := bs.join(1)
	a1 := nextAsk(t, asks)
	if a1.b != b1 || a1.g != 1 {
		t.Fatalf("asked for %p of group %d, want %p of group 1", a1.b, a1.g, b1)
	}
	b2, b3 := bs.join(1), bs.join(1)
	if b2 == b1 {
		t.Fatal("a read that arrived while a barrier was in flight was given that barrier")
	}
	if b3 != b2 {
		t.Fatal("two reads that arrived while a barrier was in flight wait for different barriers")
	}
	noAsk(t, asks, "while the first barrier is in flight")
	a1.answer <- nil
	waitEnded(t, b1)
	if b1.err != nil {
		t.Fatalf("first barrier: %v", b1.err)
	}
	a2 := nextAsk(t, asks)
	if a2.b != b2 {
		t.Fatal("the barrier asked after the first is not the one its readers wait for")
	}
	if ended(b2) {
		t.Fatal("the second barrier ended before it was answered")
	}
	a2.answer <- dragonboat.ErrShardNotReady
	waitEnded(t, b2)
	if !errors.Is(b2.err, dragonboat.ErrShardNotReady) {
		t.Fatalf("second barrier's error %v, want the dropped read's", b2.err)
	}
	b4 := bs.join(1)
	a3 := nextAsk(t, asks)
	if a3.b != b4 {
		t.Fatal("a read with no barrier in flight did not ask for its own")
	}
	a3.answer <- nil
	waitEnded(t, b4)
	if n := bs.asked.Load(); n != 3 {
		t.Fatalf("%d barriers asked for, want 3", n)
	}
}

// TestSlowBarrierLetsTheNextStart: a barrier in flight longer than
// overlapAfter no longer holds back the reads that arrived after it: the
// barrier they wait for starts beside it (when its ask says so, or at once
// for a read arriving then).
func TestSlowBarrierLetsTheNextStart(t *testing.T) {
	bs, asks := fakeBarriers(t, time.Hour)
	b1 := bs.join(1)
	a1 := nextAsk(t, asks)
	b2 := bs.join(1)
	noAsk(t, asks, "a read arriving behind a fresh barrier")
	bs.overlap(1, a1.b) // a1's ask has waited overlapAfter
	a2 := nextAsk(t, asks)
	if a2.b != b2 {
		t.Fatal("the barrier asked beside the slow one is not the one its readers wait for")
	}
	a2.answer <- nil
	waitEnded(t, b2)
	if ended(b1) {
		t.Fatal("the slow barrier ended with the one beside it")
	}
	a1.answer <- nil
	waitEnded(t, b1)
	noAsk(t, asks, "after the slow barrier ended with no read waiting")

	// A read arriving once the barrier in flight is old asks at once.
	bs.overlapAfter = 0
	b3 := bs.join(1)
	a3 := nextAsk(t, asks)
	b4 := bs.join(1)
	a4 := nextAsk(t, asks)
	if a3.b != b3 || a4.b != b4 || b3 == b4 {
		t.Fatal("with overlapAfter 0 each read should ask for its own barrier")
	}
	a3.answer <- nil
	a4.answer <- nil
	waitEnded(t, b3)
	waitEnded(t, b4)
}
