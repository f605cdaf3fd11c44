package api

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"sync"
	"time"

	"shoal/statemachine"
)

// joinMemoTTL is how long a worker's join is remembered after its last
// attempt: far longer than a joiner's retries (30 s attempts a few seconds
// apart), short enough that the memo stays small.
const joinMemoTTL = 10 * time.Minute

// joinMemo remembers, per joining key and hostname, the node a worker's
// join reserved and whether it was created, so a join asked again (its
// answer lost, or the joiner gave up while this manager went on) gets the
// same node instead of a second one. Attempts with one key take turns.
// It is this manager's memory: a retry that lands on another manager, or
// after a restart, may still create a second node.
type joinMemo struct {
	mu      sync.Mutex
	m       map[[32]byte]*joinEntry
	pruneAt time.Time
}

type joinEntry struct {
	turn chan struct{} // holds one token while an attempt runs
	// Written only by the attempt holding the turn.
	id      statemachine.NodeID // reserved node, 0 until reserved
	created bool                // the node was created with id
	last    time.Time           // the last attempt's start (under joinMemo.mu)
}

func joinKey(pub *ecdsa.PublicKey, hostname string) ([32]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return [32]byte{}, err
	}
	h := sha256.New()
	h.Write(der)
	h.Write([]byte{0})
	h.Write([]byte(hostname))
	var k [32]byte
	h.Sum(k[:0])
	return k, nil
}

// enter waits for key's turn (or ctx) and returns its entry; call leave
// with it when the attempt is done.
func (m *joinMemo) enter(ctx context.Context, key [32]byte, now time.Time) (*joinEntry, error) {
	m.mu.Lock()
	if m.m == nil {
		m.m = make(map[[32]byte]*joinEntry)
	}
	if !now.Before(m.pruneAt) {
		for k, e := range m.m {
			if now.Sub(e.last) > joinMemoTTL && len(e.turn) == 0 {
				delete(m.m, k)
			}
		}
		m.pruneAt = now.Add(time.Minute)
	}
	e := m.m[key]
	if e == nil {
		e = &joinEntry{turn: make(chan struct{}, 1)}
		m.m[key] = e
	}
	e.last = now
	m.mu.Unlock()
	select {
	case e.turn <- struct{}{}:
		return e, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (m *joinMemo) leave(e *joinEntry) { <-e.turn }
