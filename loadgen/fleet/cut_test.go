package fleet

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// A partition cuts the agent's calls in flight: one waiting on its
// context (a poll) at once, one that does not (a heartbeat in the HTTP
// client) when it fails; a call that succeeded keeps its answer, calls
// after the cut fail at once, and a call that failed on its own keeps
// its error. A call leaves nothing registered once done.
func TestPartitionCutsCallsInFlight(t *testing.T) {
	m := &manager{live: new(atomic.Bool)}
	waiting, blocked, release := make(chan struct{}), make(chan struct{}), make(chan error)
	poll := make(chan error, 1)
	go func() {
		_, err := call(m, context.Background(), func(c context.Context) (int, error) {
			close(waiting)
			<-c.Done()
			return 0, c.Err()
		})
		poll <- err
	}()
	beat := make(chan error, 1)
	go func() {
		_, err := call(m, context.Background(), func(c context.Context) (int, error) {
			close(blocked)
			return 0, <-release
		})
		beat <- err
	}()
	answered := make(chan error, 1)
	ok := make(chan struct{})
	go func() {
		v, err := call(m, context.Background(), func(c context.Context) (int, error) {
			<-ok
			return 7, nil
		})
		if err == nil && v != 7 {
			err = errors.New("answer lost")
		}
		answered <- err
	}()
	<-waiting
	<-blocked
	if _, err := call(m, context.Background(), func(context.Context) (int, error) { return 0, errors.New("refused") }); err == nil || errors.Is(err, errPartitioned) {
		t.Fatalf("a call failing on its own before any cut: %v", err)
	}
	m.cut(time.Hour)
	select {
	case err := <-poll:
		if !errors.Is(err, errPartitioned) {
			t.Fatalf("the waiting call ended with %v, want the partition", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call was not cut")
	}
	release <- errors.New("connection reset")
	if err := <-beat; !errors.Is(err, errPartitioned) {
		t.Fatalf("the call in the HTTP client failed with %v, want the partition", err)
	}
	close(ok)
	if err := <-answered; err != nil {
		t.Fatalf("the call answered during the cut: %v", err)
	}
	if _, err := call(m, context.Background(), func(context.Context) (int, error) { return 1, nil }); !errors.Is(err, errPartitioned) {
		t.Fatalf("a call during the partition: %v", err)
	}
	m.mu.Lock()
	left := len(m.mu.calls)
	m.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d calls still registered", left)
	}
}

// A call that does not wait on its context costs one allocation in the
// harness (a context.WithCancel and a registration per call were 3 % of
// the simulated agents' CPU in a ramp).
func TestUncutCallRegistersNothing(t *testing.T) {
	m := &manager{}
	f := func(c context.Context) (int, error) { return 1, c.Err() }
	n := testing.AllocsPerRun(1000, func() {
		if _, err := call(m, context.Background(), f); err != nil {
			t.Fatal(err)
		}
	})
	if n > 1 {
		t.Fatalf("%.0f allocations per call, want 1", n)
	}
}
