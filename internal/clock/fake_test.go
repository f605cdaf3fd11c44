package clock

import (
	"testing"
	"time"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFakeFiresInDeadlineOrder(t *testing.T) {
	f := NewFake(epoch)
	a, b := f.NewTimer(2*time.Second), f.NewTimer(time.Second)
	if got := f.Pending(); len(got) != 2 || got[0] != time.Second {
		t.Fatalf("Pending = %v", got)
	}
	f.Advance(1500 * time.Millisecond)
	select {
	case at := <-b.C():
		if !at.Equal(epoch.Add(time.Second)) {
			t.Fatalf("b fired with %v", at)
		}
	default:
		t.Fatal("b did not fire")
	}
	select {
	case <-a.C():
		t.Fatal("a fired early")
	default:
	}
	if !f.AdvanceToNext() || !f.Now().Equal(epoch.Add(2*time.Second)) {
		t.Fatalf("AdvanceToNext: now %v", f.Now())
	}
	<-a.C()
	if f.AdvanceToNext() {
		t.Fatal("AdvanceToNext with no timers moved the clock")
	}
}

func TestFakeStopReset(t *testing.T) {
	f := NewFake(epoch)
	tm := f.NewTimer(time.Second)
	if !tm.Stop() || tm.Stop() {
		t.Fatal("Stop: want true then false")
	}
	f.Advance(time.Hour)
	select {
	case <-tm.C():
		t.Fatal("stopped timer fired")
	default:
	}
	tm.Reset(time.Second)
	f.Advance(time.Second) // fires; the value waits on C
	tm.Reset(time.Second)  // discards it
	select {
	case <-tm.C():
		t.Fatal("Reset kept a stale value")
	default:
	}
	f.Advance(time.Second)
	<-tm.C()
	if got := f.NewTimer(0); len(got.C()) != 1 {
		t.Fatal("a zero timer did not fire at once")
	}
}

func TestFakeBlockUntil(t *testing.T) {
	f := NewFake(epoch)
	done := make(chan struct{})
	go func() {
		<-f.After(time.Minute)
		close(done)
	}()
	if err := f.BlockUntil(1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Minute)
	<-done
	if err := f.BlockUntil(1, 10*time.Millisecond); err == nil {
		t.Fatal("BlockUntil returned with no timer active")
	}
}

func TestFakeAfterFunc(t *testing.T) {
	f := NewFake(epoch)
	ran := make(chan time.Time, 2)
	f.AfterFunc(time.Second, func() { ran <- f.Now() })
	stopped := f.AfterFunc(time.Second, func() { ran <- time.Time{} })
	if f.Waiters() != 2 || !stopped.Stop() {
		t.Fatal("AfterFunc timers are not waiters or do not stop")
	}
	f.Advance(time.Second)
	if at := <-ran; at.Before(epoch.Add(time.Second)) {
		t.Fatalf("ran at %v", at)
	}
	if f.Waiters() != 0 {
		t.Fatal("a fired AfterFunc is still waiting")
	}
}
