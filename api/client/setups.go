package client

import (
	"context"
	"sync"
)

// A process that simulates thousands of agents (the loadgen's fleet) ran
// every agent's connection set-ups at once: 2,500 joins and TLS handshakes
// sharing a process's share of the CPU each took longer than its deadline
// (30 s), the managers cut them, and their retries started the same work
// again. At a machine load of 40 a 10,000-agent join collapsed: 83 agents
// connected after three minutes, the replicas counted 30,000 failed
// handshakes each. A real agent sets up its connections on a host of its
// own, one at a time. LimitSetups gives such a process the same shape:
// at most n set-ups run at once, the rest wait their turn (and their
// deadline) in order, so a set-up that starts finishes in time. Set-ups of
// an agent that joined already (its dialer) go before joins, so a node
// the join just created gets its session before its first heartbeat is
// due, rather than after every other agent's join (but a join gets every
// joinEvery-th turn when both wait).

// Set-up priorities: an agent's own connection before a join's.
const (
	setupAgent = iota
	setupJoin
)

var setups struct {
	sync.Mutex
	limit, running int
	handed         int                // turns handed to waiters
	waiting        [2][]chan struct{} // by priority, oldest first
}

// LimitSetups bounds the connection set-ups (TCP and TLS) of this
// process's agents' dialers and joins to n at once; n ≤ 0 lifts the bound
// (the default: one agent per process needs none).
func LimitSetups(n int) {
	setups.Lock()
	setups.limit = max(n, 0)
	for setups.limit == 0 || setups.running < setups.limit {
		if !handOnLocked() {
			break
		}
	}
	setups.Unlock()
}

// setupsLimited reports whether LimitSetups set a bound.
func setupsLimited() bool {
	setups.Lock()
	defer setups.Unlock()
	return setups.limit > 0
}

// acquireSetup waits for a set-up turn at priority prio; it returns the
// function that gives the turn back, or ctx's error.
func acquireSetup(ctx context.Context, prio int) (func(), error) {
	setups.Lock()
	if setups.limit == 0 || setups.running < setups.limit && len(setups.waiting[0])+len(setups.waiting[1]) == 0 {
		setups.running++
		setups.Unlock()
		return releaseSetup, nil
	}
	ch := make(chan struct{})
	setups.waiting[prio] = append(setups.waiting[prio], ch)
	setups.Unlock()
	select {
	case <-ch:
		return releaseSetup, nil
	case <-ctx.Done():
		setups.Lock()
		defer setups.Unlock()
		for i, w := range setups.waiting[prio] {
			if w == ch {
				setups.waiting[prio] = append(setups.waiting[prio][:i:i], setups.waiting[prio][i+1:]...)
				return nil, ctx.Err()
			}
		}
		// The turn was handed over as ctx ended: give it on.
		releaseLocked()
		return nil, ctx.Err()
	}
}

func releaseSetup() {
	setups.Lock()
	releaseLocked()
	setups.Unlock()
}

func releaseLocked() {
	setups.running--
	if setups.limit == 0 || setups.running < setups.limit {
		handOnLocked()
	}
}

// joinEvery: when both agents' set-ups and joins wait, every joinEvery-th
// turn goes to a join. Strict priority starved the joins: at a machine
// load of 40 the joined agents' heartbeats timed out, each timeout cost
// a connection and its set-up, and no join got a turn for minutes.
const joinEvery = 4

// handOnLocked gives a turn to the oldest waiter of the priority whose
// turn it is (an agent's, but every joinEvery-th a join's when both
// wait); false if none waits.
func handOnLocked() bool {
	p := setupAgent
	setups.handed++
	if len(setups.waiting[setupAgent]) == 0 || len(setups.waiting[setupJoin]) > 0 && setups.handed%joinEvery == 0 {
		p = setupJoin
	}
	l := setups.waiting[p]
	if len(l) == 0 {
		return false
	}
	setups.waiting[p] = l[1:]
	setups.running++
	close(l[0])
	return true
}
