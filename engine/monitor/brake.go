package monitor

import (
	"math"
	"time"
)

// The mass-expiry brake. When a large share of the fleet misses its
// heartbeats at once, the likelier fault is on the manager's side (a leader
// too loaded to take heartbeats in time, a manager cut off from the
// network) rather than that many nodes failing together; marking them all
// disconnected or down would replace their tasks at once and load the
// manager further. So when the nodes expiring now, with those that expired
// within the last expiry window (GraceFactor base TTLs), reach
// MassExpiryShare of the tracked nodes (and at least MassExpiryMin nodes),
// Tick holds every expiring node in its status for up to MassExpiryHold
// from the first held tick; a node that heartbeats meanwhile is simply
// alive. If they are still silent when the hold ends, they expire as
// usual: a real mass failure is handled one hold later. Kubernetes' node
// lifecycle controller makes the same call (it stops evicting when a
// zone is mostly unready).

// Brake defaults.
const (
	DefaultMassExpiryShare = 0.1
	DefaultMassExpiryMin   = 10
	DefaultMassExpiryHold  = time.Minute
)

// brake is the mass-expiry brake's state.
type brake struct {
	recent []int64 // when recent expiries happened (unix ns), oldest first
	since  int64   // the first held tick of the current hold; 0: none
	held   int     // nodes held at the last tick
}

// Braking reports how many expiring nodes the last Tick held back and
// since when the current hold lasts (0 nodes: none held).
func (m *Monitor) Braking() (held int, since int64) {
	if m.brake.held == 0 {
		return 0, 0
	}
	return m.brake.held, m.brake.since
}

// holds decides, at a Tick at now with `expiring` nodes past their
// deadline, whether to hold them back, and records the decision.
func (m *Monitor) holds(now int64, expiring int) bool {
	b := &m.brake
	window := m.grace(m.baseTTL())
	i := 0
	for i < len(b.recent) && b.recent[i] <= now-window {
		i++
	}
	b.recent = b.recent[i:]
	b.held = 0
	if m.cfg.MassExpiryShare < 0 || expiring == 0 {
		if expiring == 0 {
			b.since = 0
		}
		return false
	}
	limit := max(m.cfg.MassExpiryMin, int(math.Ceil(m.cfg.MassExpiryShare*float64(len(m.rows)))))
	if expiring+len(b.recent) < limit {
		b.since = 0
		return false
	}
	if b.since == 0 {
		b.since = now
	}
	if now >= b.since+int64(m.cfg.MassExpiryHold) {
		return false // held long enough: they are gone
	}
	b.held = expiring
	return true
}

// expired records an expiry at now for the brake's window.
func (m *Monitor) expired(now int64) { m.brake.recent = append(m.brake.recent, now) }
