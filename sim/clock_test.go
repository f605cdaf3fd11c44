package sim

import (
	"testing"
	"time"
)

// The simulation's clock fires timers in deadline order, ties in the
// order they were armed, on the caller's goroutine, including timers
// armed while it runs; a stopped timer never fires; the clock ends at the
// time it was run to.
func TestClockOrder(t *testing.T) {
	c := NewClock(epoch)
	var got []string
	at := func(d time.Duration, name string) { c.AfterFunc(d, func() { got = append(got, name) }) }
	at(2*time.Second, "b")
	at(time.Second, "a1")
	at(time.Second, "a2")
	stopped := c.AfterFunc(1500*time.Millisecond, func() { got = append(got, "stopped") })
	c.AfterFunc(500*time.Millisecond, func() { at(time.Second, "armed at 0.5s") }) // due at 1.5s
	ch := c.NewTimer(3 * time.Second)
	stopped.Stop()
	c.RunUntil(epoch.Add(2500*time.Millisecond), nil)
	want := []string{"a1", "a2", "armed at 0.5s", "b"}
	if len(got) != len(want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("fired %v, want %v", got, want)
		}
	}
	if now := c.Now(); !now.Equal(epoch.Add(2500 * time.Millisecond)) {
		t.Fatalf("clock at %v after the run", now.Sub(epoch))
	}
	select {
	case <-ch.C():
		t.Fatal("a channel timer fired before its deadline")
	default:
	}
	c.RunUntil(epoch.Add(3*time.Second), nil)
	select {
	case v := <-ch.C():
		if !v.Equal(epoch.Add(3 * time.Second)) {
			t.Fatalf("channel timer fired with %v", v.Sub(epoch))
		}
	default:
		t.Fatal("the channel timer did not fire at its deadline")
	}
}
