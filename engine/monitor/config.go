package monitor

import (
	"errors"
	"fmt"
	"time"

	"shoal/cluster"
	"shoal/statemachine"
)

// Config tunes a Monitor. Zero values take the defaults named on each field.
type Config struct {
	// TargetRate is the aggregate heartbeat rate the cluster aims at, in
	// heartbeats per second: the base TTL is nodes / TargetRate seconds,
	// clamped to [MinTTL, MaxTTL]. Default 2000.
	TargetRate float64
	// MinTTL is the shortest base TTL (before jitter). Default 5s.
	MinTTL time.Duration
	// MaxTTL is the longest base TTL (before jitter). Default 2m.
	MaxTTL time.Duration
	// Jitter is the largest fraction of the base TTL added to each TTL
	// handed out, so agents that started together drift apart: a TTL lies
	// in [base, base·(1+Jitter)). It is derived from Seed, the node ID and
	// the node's heartbeat count, never from global randomness. Default 0.2;
	// negative means none.
	Jitter float64
	// GraceFactor is how many TTLs a node may stay silent: it expires
	// GraceFactor × the TTL it was last handed after its last heartbeat.
	// Default 3.
	GraceFactor float64
	// FailoverGrace is how long after BecomeLeader nothing expires and
	// nothing is orphaned; every node gets at least this long (or its
	// grace, if longer) to send its first heartbeat to the new leader.
	// At most OrphanTimeout. Default 30s; negative means none.
	FailoverGrace time.Duration
	// OrphanTimeout is how long a node stays down before Tick reports it
	// with ChangeOrphan (its assigned..running tasks are then orphaned).
	// At least DownTTL. Default 24h.
	OrphanTimeout time.Duration
	// ReReportWindow is how long an initializing (reconnecting) node may
	// take to re-report its tasks: its first heartbeat after re-reporting
	// makes it ready, and so does its first heartbeat after this window
	// even without a re-report (reconciliation then decides on what the
	// state holds). Default: two base TTLs (heartbeat periods) at the
	// time of the heartbeat.
	ReReportWindow time.Duration
	// MassExpiryShare is the share of the tracked nodes whose heartbeats
	// may expire within one expiry window (GraceFactor base TTLs) before
	// the monitor holds the expiring ones (brake.go). Default 0.1;
	// negative: never hold.
	MassExpiryShare float64
	// MassExpiryMin is the fewest expiring nodes that engage the brake,
	// so a small cluster losing a node or two is never held. Default 10.
	MassExpiryMin int
	// MassExpiryHold is how long the brake holds expiring nodes before
	// they expire anyway. Default 1m.
	MassExpiryHold time.Duration
	// Seed is mixed into the jitter, so a replay with the same seed gives
	// the same TTLs. Default 0.
	Seed uint64
	// Disconnectable reports whether a node holds tasks of services with a
	// disconnect window (lost_after > 0). Such a node becomes disconnected
	// when its heartbeat expires; any other node becomes down. It is called
	// from Tick only, for expiring nodes. Default nil: every expiring node
	// becomes down.
	Disconnectable func(statemachine.NodeID) bool
	// WindowOpen reports whether a disconnected node still holds a task
	// with a live disconnect window (statemachine.State.
	// DisconnectWindowOpen). A disconnected node for which it reports
	// false goes down at the next Tick, and the down-node path applies
	// (Nomad's rule). It is called from Tick only, for disconnected nodes.
	// Default nil: no window is open, every disconnected node goes down.
	WindowOpen func(statemachine.NodeID) bool
}

// Defaults.
const (
	DefaultTargetRate    = 2000
	DefaultMinTTL        = 5 * time.Second
	DefaultMaxTTL        = 2 * time.Minute
	DefaultJitter        = 0.2
	DefaultGraceFactor   = 3
	DefaultFailoverGrace = 30 * time.Second
	DefaultOrphanTimeout = 24 * time.Hour
)

// Errors.
var (
	// ErrConfig is wrapped by every configuration error.
	ErrConfig = errors.New("monitor: bad configuration")
	// ErrUnknownNode: the node is not tracked; Track it (from the cluster
	// group's state) before it heartbeats.
	ErrUnknownNode = cluster.ErrUnknownNode
)

func (c Config) withDefaults() Config {
	orDefault(&c.TargetRate, DefaultTargetRate)
	orDefault(&c.MinTTL, DefaultMinTTL)
	orDefault(&c.MaxTTL, max(DefaultMaxTTL, c.MinTTL))
	switch {
	case c.Jitter == 0:
		c.Jitter = DefaultJitter
	case c.Jitter < 0:
		c.Jitter = 0
	}
	orDefault(&c.GraceFactor, DefaultGraceFactor)
	switch {
	case c.FailoverGrace == 0:
		c.FailoverGrace = DefaultFailoverGrace
	case c.FailoverGrace < 0:
		c.FailoverGrace = 0
	}
	orDefault(&c.OrphanTimeout, DefaultOrphanTimeout)
	orDefault(&c.MassExpiryShare, DefaultMassExpiryShare)
	orDefault(&c.MassExpiryMin, DefaultMassExpiryMin)
	orDefault(&c.MassExpiryHold, DefaultMassExpiryHold)
	return c
}

// orDefault sets *v to d when it is the zero value.
func orDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

func (c Config) validate() error {
	switch {
	case c.TargetRate < 0:
		return fmt.Errorf("%w: target rate %g heartbeats/s is negative", ErrConfig, c.TargetRate)
	case c.MinTTL < 0 || c.MaxTTL < c.MinTTL:
		return fmt.Errorf("%w: TTL bounds [%s, %s] are not a range", ErrConfig, c.MinTTL, c.MaxTTL)
	case c.Jitter > 1:
		return fmt.Errorf("%w: jitter %g is more than the whole TTL; use 0..1", ErrConfig, c.Jitter)
	case c.GraceFactor < 1:
		return fmt.Errorf("%w: grace factor %g would expire nodes before their TTL; use at least 1", ErrConfig, c.GraceFactor)
	case c.MassExpiryShare > 1 || c.MassExpiryMin < 0 || c.MassExpiryHold < 0:
		return fmt.Errorf("%w: the mass-expiry brake takes a share up to 1 (negative: off), a node count and a hold that are not negative", ErrConfig)
	case c.OrphanTimeout < 0 || c.ReReportWindow < 0:
		return fmt.Errorf("%w: orphan timeout and re-report window must not be negative", ErrConfig)
	case c.OrphanTimeout < c.DownTTL():
		return fmt.Errorf("%w: orphan timeout %s is shorter than the %s a silent node takes to go down (%g heartbeat periods of %s): a node would be orphaned before it could be seen down",
			ErrConfig, c.OrphanTimeout, c.DownTTL(), c.GraceFactor, c.MinTTL)
	case c.FailoverGrace > c.OrphanTimeout:
		return fmt.Errorf("%w: failover grace %s is longer than the orphan timeout %s; give 0 up to the orphan timeout", ErrConfig, c.FailoverGrace, c.OrphanTimeout)
	}
	return nil
}

// DownTTL is the node-down TTL: how long a node of a small cluster (whose
// heartbeat period is MinTTL) stays silent before it expires, GraceFactor
// × MinTTL, before jitter. Heartbeat periods grow with the node count, so
// in a large cluster a node takes longer to expire.
func (c Config) DownTTL() time.Duration {
	return time.Duration(c.GraceFactor * float64(c.MinTTL))
}
