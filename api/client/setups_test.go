package client

import (
	"context"
	"testing"
	"time"
)

// freshSetups starts a test with a bound of n and no set-up running.
func freshSetups(t *testing.T, n int) {
	reset := func(n int) {
		setups.Lock()
		setups.limit, setups.running, setups.handed, setups.waiting = n, 0, 0, [2][]chan struct{}{}
		setups.Unlock()
	}
	reset(n)
	t.Cleanup(func() { reset(0) })
}

// waiting counts the set-ups waiting at priority p.
func waiting(p int) int {
	setups.Lock()
	defer setups.Unlock()
	return len(setups.waiting[p])
}

// awaitWaiting polls (with a deadline) until n set-ups wait at priority p.
func awaitWaiting(t *testing.T, p, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for waiting(p) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d set-ups wait at priority %d, want %d", waiting(p), p, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// At most the limit of set-ups run at once; a turn given back goes to an
// agent's own set-up before any join, oldest first; a waiter whose context
// ends leaves the queue; lifting the bound lets every waiter go.
func TestSetupTurnsBoundAndPriority(t *testing.T) {
	freshSetups(t, 2)
	ctx := context.Background()
	r1, _ := acquireSetup(ctx, setupAgent)
	r2, _ := acquireSetup(ctx, setupJoin)
	got := make(chan string, 8)
	wait := func(name string, ctx context.Context, p int) {
		release, err := acquireSetup(ctx, p)
		if err != nil {
			got <- name + " gave up"
			return
		}
		got <- name
		_ = release // held until the test ends
	}
	go wait("join1", ctx, setupJoin)
	awaitWaiting(t, setupJoin, 1)
	go wait("join2", ctx, setupJoin)
	awaitWaiting(t, setupJoin, 2)
	cctx, cancel := context.WithCancel(ctx)
	go wait("agent-cancelled", cctx, setupAgent)
	awaitWaiting(t, setupAgent, 1)
	go wait("agent1", ctx, setupAgent)
	awaitWaiting(t, setupAgent, 2)
	select {
	case g := <-got:
		t.Fatalf("%s got a turn while 2 of 2 ran", g)
	default:
	}
	cancel()
	if g := <-got; g != "agent-cancelled gave up" {
		t.Fatalf("got %q, want the cancelled waiter to give up", g)
	}
	r1()
	if g := <-got; g != "agent1" {
		t.Fatalf("the first turn given back went to %s, want agent1 (agents before joins)", g)
	}
	r2()
	if g := <-got; g != "join1" {
		t.Fatalf("the second turn went to %s, want join1 (oldest join)", g)
	}
	LimitSetups(0)
	if g := <-got; g != "join2" {
		t.Fatalf("after the bound was lifted %s went, want join2", g)
	}
}

// While agents' set-ups and joins both wait, every joinEvery-th turn goes
// to a join: joins are not starved by agents that keep dialling.
func TestSetupTurnsJoinsNotStarved(t *testing.T) {
	freshSetups(t, 1)
	ctx := context.Background()
	release, _ := acquireSetup(ctx, setupAgent)
	got := make(chan string, 16)
	var releases = make(chan func(), 16)
	queue := func(name string, p, n int) {
		go func() {
			r, _ := acquireSetup(ctx, p)
			got <- name
			releases <- r
		}()
		awaitWaiting(t, p, n)
	}
	for i := range 5 {
		queue("agent", setupAgent, i+1)
	}
	queue("join", setupJoin, 1)
	queue("join", setupJoin, 2)
	var order []string
	for range 7 {
		release()
		order = append(order, <-got)
		release = <-releases
	}
	release()
	want := []string{"agent", "agent", "agent", "join", "agent", "agent", "join"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("turns went to %v, want %v", order, want)
		}
	}
}
