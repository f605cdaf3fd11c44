package monitor

import (
	"testing"
	"time"

	"shoal/statemachine"
)

// heardFleet returns a leading monitor past its failover grace over n ready
// nodes (IDs 1..n), every one of which heartbeated at the returned time.
func heardFleet(t *testing.T, n int, cfg Config) (*Monitor, int64) {
	t.Helper()
	cfg.Jitter, cfg.FailoverGrace, cfg.MinTTL = -1, time.Second, 5*time.Second
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		m.Track(statemachine.NodeID(i), statemachine.NodeReady, epoch, epoch)
	}
	m.BecomeLeader(epoch)
	now := epoch + int64(2*time.Second)
	beat(t, m, now, 1, n)
	return m, now
}

// beat heartbeats nodes lo..hi at now.
func beat(t *testing.T, m *Monitor, now int64, lo, hi int) {
	t.Helper()
	for i := lo; i <= hi; i++ {
		if _, err := m.Heartbeat(statemachine.NodeID(i), now); err != nil {
			t.Fatal(err)
		}
	}
}

// The expiry window of these fleets: 3 TTLs of 5s.
const window = 15 * time.Second

// When 15 of 100 nodes go silent together, none of them is marked for the
// hold; the others keep heartbeating. Once the hold is over they expire.
func TestBrakeHoldsAMassExpiryThenLetsItGo(t *testing.T) {
	m, t0 := heardFleet(t, 100, Config{})
	at := func(d time.Duration) int64 { return t0 + int64(d) }
	for s := time.Duration(0); s <= window+DefaultMassExpiryHold; s += 5 * time.Second {
		beat(t, m, at(s), 16, 100)
		changes := m.Tick(at(s))
		held, since := m.Braking()
		switch {
		case s < window:
			if len(changes) != 0 || held != 0 {
				t.Fatalf("at %v, before any deadline: %v, %d held", s, changes, held)
			}
		case s < window+DefaultMassExpiryHold:
			if len(changes) != 0 || held != 15 || since != at(window) {
				t.Fatalf("at %v: %d changes, %d held since %v; want the 15 silent nodes held since %v", s, len(changes), held, since, window)
			}
		default:
			if len(changes) != 15 || held != 0 {
				t.Fatalf("after the hold: %d changes, %d held; want the 15 silent nodes marked", len(changes), held)
			}
			for _, c := range changes {
				if c.Node > 15 || c.To != statemachine.NodeDown {
					t.Fatalf("after the hold: %v", c)
				}
			}
		}
	}
}

// A few silent nodes (below the share and the minimum) expire at once, as
// without the brake.
func TestBrakeLetsAFewExpire(t *testing.T) {
	m, t0 := heardFleet(t, 100, Config{})
	beat(t, m, t0+int64(window), 6, 100)
	if got := m.Tick(t0 + int64(window)); len(got) != 5 {
		t.Fatalf("5 silent nodes of 100: %d changes, want 5", len(got))
	}
}

// A held node that heartbeats during the hold is alive: it never expires.
func TestBrakeHeldNodeThatHeartbeatsStays(t *testing.T) {
	m, t0 := heardFleet(t, 50, Config{})
	now := t0 + int64(window)
	beat(t, m, now, 13, 50)
	if got := m.Tick(now); len(got) != 0 {
		t.Fatalf("12 silent nodes of 50 not held: %v", got)
	}
	now += int64(10 * time.Second)
	beat(t, m, now, 1, 50) // the manager caught up: everyone is heard
	if got := m.Tick(now); len(got) != 0 {
		t.Fatalf("nodes heard during the hold expired: %v", got)
	}
	if held, _ := m.Braking(); held != 0 {
		t.Fatalf("%d still held after every node was heard", held)
	}
	now += int64(DefaultMassExpiryHold)
	beat(t, m, now, 1, 50)
	if got := m.Tick(now); len(got) != 0 {
		t.Fatalf("after the hold: %v", got)
	}
}

// Expiries spread over ticks count together within the expiry window: 8
// nodes expire (fewer than 10), then 4 more a tick later are held.
func TestBrakeCountsRecentExpiries(t *testing.T) {
	m, t0 := heardFleet(t, 100, Config{})
	at := func(d time.Duration) int64 { return t0 + int64(d) }
	beat(t, m, at(5*time.Second), 9, 100) // nodes 1-8 fall silent first
	beat(t, m, at(window), 13, 100)       // then 9-12
	if got := m.Tick(at(window)); len(got) != 8 {
		t.Fatalf("first 8 expiries: %d changes", len(got))
	}
	next := 5*time.Second + window
	beat(t, m, at(next), 13, 100)
	if got := m.Tick(at(next)); len(got) != 0 {
		t.Fatalf("4 more within the window (12 in all) not held: %v", got)
	}
	if held, _ := m.Braking(); held != 4 {
		t.Fatalf("%d held, want 4", held)
	}
}

// With the brake off, a mass expiry is marked at once.
func TestBrakeOff(t *testing.T) {
	m, t0 := heardFleet(t, 100, Config{MassExpiryShare: -1})
	beat(t, m, t0+int64(window), 31, 100)
	if got := m.Tick(t0 + int64(window)); len(got) != 30 {
		t.Fatalf("brake off: %d changes, want 30", len(got))
	}
}
