package monitor

import (
	"errors"
	"slices"
	"testing"
	"time"

	"shoal/statemachine"
)

func TestTTLGrowsWithNodes(t *testing.T) {
	for _, tc := range []struct {
		nodes int
		want  time.Duration
	}{{1, 5 * time.Second}, {10_000, 5 * time.Second}, {20_000, 10 * time.Second},
		{100_000, 50 * time.Second}, {1_000_000, 2 * time.Minute}} {
		m, _ := New(Config{})
		for i := 1; i <= tc.nodes; i++ {
			m.Track(statemachine.NodeID(i), statemachine.NodeReady, 0, 0)
		}
		if got := m.TTL(); got != tc.want {
			t.Errorf("%d nodes: base TTL %s, want %s", tc.nodes, got, tc.want)
		}
	}
}

// Jitter stays within [base, base·1.2), is a function of (seed, node,
// count), spreads, and keeps the aggregate rate at or under the target.
func TestJitter(t *testing.T) {
	const nodes = 40_000
	mk := func(seed uint64) *Monitor {
		m, _ := New(Config{Seed: seed})
		for i := 1; i <= nodes; i++ {
			m.Track(statemachine.NodeID(i), statemachine.NodeReady, 0, 0)
		}
		return m
	}
	a, b, c := mk(1), mk(1), mk(2)
	base := a.TTL()
	distinct := map[time.Duration]bool{}
	var sum float64
	sameAsOtherSeed := 0
	for i := 1; i <= nodes; i++ {
		id := statemachine.NodeID(i)
		ba, _ := a.Heartbeat(id, epoch)
		bb, _ := b.Heartbeat(id, epoch)
		bc, _ := c.Heartbeat(id, epoch)
		if ba.TTL != bb.TTL {
			t.Fatalf("node %d: TTL %s and %s from the same inputs", i, ba.TTL, bb.TTL)
		}
		if ba.TTL == bc.TTL {
			sameAsOtherSeed++
		}
		if ba.TTL < base || ba.TTL >= base+base/5 {
			t.Fatalf("node %d: TTL %s outside [%s, %s)", i, ba.TTL, base, base+base/5)
		}
		distinct[ba.TTL] = true
		sum += ba.TTL.Seconds()
	}
	if len(distinct) < nodes/2 {
		t.Errorf("only %d distinct TTLs for %d nodes", len(distinct), nodes)
	}
	if sameAsOtherSeed > nodes/100 {
		t.Errorf("%d of %d TTLs unchanged by a different seed", sameAsOtherSeed, nodes)
	}
	// Each node heartbeats once per TTL: the aggregate rate is Σ 1/TTL.
	var rate float64
	for i := 1; i <= nodes; i++ {
		b, _ := a.Heartbeat(statemachine.NodeID(i), epoch)
		rate += 1 / b.TTL.Seconds()
	}
	if rate > DefaultTargetRate || rate < 0.8*DefaultTargetRate {
		t.Errorf("aggregate rate %.0f/s, want within [80%%, 100%%] of %d/s", rate, DefaultTargetRate)
	}
	// The next heartbeat of a node gets a different TTL.
	b1, _ := a.Heartbeat(7, epoch)
	b2, _ := a.Heartbeat(7, epoch)
	if b1.TTL == b2.TTL {
		t.Errorf("node 7's consecutive TTLs are both %s", b1.TTL)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{TargetRate: -1},
		{MinTTL: time.Minute, MaxTTL: time.Second},
		{Jitter: 2},
		{GraceFactor: 0.5},
		{OrphanTimeout: 14 * time.Second}, // under 3 × the 5s default MinTTL
		{FailoverGrace: 2 * time.Minute, OrphanTimeout: time.Minute}, // grace past the orphan timeout
	} {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v, want ErrConfig", cfg, err)
		}
	}
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config()
	if c.TargetRate != 2000 || c.MinTTL != 5*time.Second || c.GraceFactor != 3 ||
		c.FailoverGrace != 30*time.Second || c.OrphanTimeout != 24*time.Hour || c.Jitter != 0.2 {
		t.Errorf("defaults: %+v", c)
	}
	// The bounds themselves are allowed, and a negative failover grace is
	// none at all.
	m, err = New(Config{MinTTL: time.Second, FailoverGrace: -1, OrphanTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Config(); c.FailoverGrace != 0 || c.OrphanTimeout != c.DownTTL() {
		t.Errorf("failover grace %s, orphan timeout %s (down TTL %s); want 0 and the down TTL", c.FailoverGrace, c.OrphanTimeout, c.DownTTL())
	}
	if _, err := New(Config{MinTTL: time.Second, FailoverGrace: 20 * time.Second, OrphanTimeout: 20 * time.Second}); err != nil {
		t.Errorf("a failover grace equal to the orphan timeout: %v", err)
	}
}

func fleet(t testing.TB, nodes int) *Monitor {
	m, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= nodes; i++ {
		m.Track(statemachine.NodeID(i), statemachine.NodeReady, epoch, epoch)
	}
	m.BecomeLeader(epoch)
	return m
}

// Heartbeats and quiet ticks allocate nothing.
func TestNoAllocs(t *testing.T) {
	const nodes = 10_000
	m := fleet(t, nodes)
	i := 0
	now := epoch
	if a := testing.AllocsPerRun(10_000, func() {
		i++
		now += int64(time.Microsecond)
		if _, err := m.Heartbeat(statemachine.NodeID(i%nodes+1), now); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("Heartbeat: %v allocations per call, want 0", a)
	}
	m.Tick(now) // sizes the change buffer
	if a := testing.AllocsPerRun(100, func() {
		if cs := m.Tick(now); len(cs) != 0 {
			t.Fatalf("quiet tick reported %v", cs)
		}
	}); a != 0 {
		t.Errorf("Tick: %v allocations per call, want 0", a)
	}
}

// BenchmarkHeartbeats10kNodes: heartbeats per second one core records for a
// fleet of 10,000 nodes, round robin.
func BenchmarkHeartbeats10kNodes(b *testing.B) {
	const nodes = 10_000
	m := fleet(b, nodes)
	b.ReportAllocs()
	now := epoch
	i := 0
	for b.Loop() {
		i++
		now += int64(time.Microsecond)
		if _, err := m.Heartbeat(statemachine.NodeID(i%nodes+1), now); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "heartbeats/s")
}

// BenchmarkTick10kNodes: one quiet Tick over 10,000 nodes.
func BenchmarkTick10kNodes(b *testing.B) {
	const nodes = 10_000
	m := fleet(b, nodes)
	for i := 1; i <= nodes; i++ {
		m.Heartbeat(statemachine.NodeID(i), epoch+20*int64(time.Second))
	}
	now := epoch + 31*int64(time.Second) // past the failover grace, before any expiry
	b.ReportAllocs()
	for b.Loop() {
		if cs := m.Tick(now); len(cs) != 0 {
			b.Fatal(cs)
		}
	}
}

// Expiring names exactly the ready nodes the next Tick at the same time
// asks Disconnectable about, and nothing before leadership or within the
// failover grace.
func TestExpiring(t *testing.T) {
	var asked []statemachine.NodeID
	cfg := scriptConfig()
	cfg.Disconnectable = func(n statemachine.NodeID) bool { asked = append(asked, n); return false }
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sec := int64(time.Second)
	for _, n := range []statemachine.NodeID{1, 2, 3} {
		m.Track(n, statemachine.NodeReady, 0, 0)
	}
	m.Track(4, statemachine.NodeInitializing, 0, 0)
	if got := m.Expiring(100*sec, nil); len(got) != 0 {
		t.Fatalf("Expiring before leadership = %v", got)
	}
	m.BecomeLeader(0)
	grace := int64(m.Config().FailoverGrace)
	if got := m.Expiring(grace-1, nil); len(got) != 0 {
		t.Fatalf("Expiring within the failover grace = %v", got)
	}
	now := grace + 100*sec
	if _, err := m.Heartbeat(2, now-sec); err != nil {
		t.Fatal(err)
	}
	got := m.Expiring(now, nil)
	slices.Sort(got)
	m.Tick(now)
	slices.Sort(asked)
	if !slices.Equal(got, []statemachine.NodeID{1, 3}) || !slices.Equal(asked, got) {
		t.Fatalf("Expiring = %v, Tick asked about %v; want [1 3] for both", got, asked)
	}
}
