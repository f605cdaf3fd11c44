package engine

import (
	"context"
	"testing"
	"time"

	"shoal/route"
	"shoal/statemachine"
)

// BenchmarkSubmitRamp: a scheduler run's 100,000 assignments over 16
// groups, from SubmitMany to the entries the proposers hand Raft, without
// Raft: once every group's queue holds its calls, each queue is drained
// into entries at once and every call answered OK. ns/task and B/task are
// per assignment submitted (the run's driver holds the commands already).
func BenchmarkSubmitRamp(b *testing.B) {
	const groups, n = 16, 100_000
	e := &Engine{cfg: Config{Groups: groups}.withDefaults()}
	for g := 0; g <= groups; g++ {
		p := &proposer{cfg: &e.cfg, group: g, kick: make(chan struct{}, 1), stop: make(chan struct{})}
		p.mu.space = make(chan struct{})
		e.props = append(e.props, p)
	}
	cmds := make([]statemachine.Command, n)
	for i := range cmds {
		g := 1 + i%groups
		cmds[i] = statemachine.Command{Kind: statemachine.CmdAssign,
			Task: statemachine.TaskID(uint64(g)<<48 | uint64(1_000_000+i)), Node: statemachine.NodeID(1 + i%2000)}
	}
	ctx := context.Background()
	ok := func(int) route.Outcome { return route.Outcome{} }
	entries, bytes := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		done := make(chan []route.Outcome)
		go func() { done <- e.SubmitMany(ctx, cmds) }()
		for _, p := range e.props[1:] {
			<-p.kick // its calls are queued (all at once: the queue has room)
		}
		now := time.Unix(0, 1)
		for _, p := range e.props[1:] {
			for {
				calls, size, _ := p.take()
				if calls == nil {
					break
				}
				ent := p.entry(calls, size, now, now.Add(time.Second))
				entries, bytes = entries+1, bytes+len(ent)
				p.finish(calls, size, ok)
			}
		}
		for i, o := range <-done {
			if o.Err() != nil {
				b.Fatalf("command %d: %v", i, o.Err())
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/task")
	b.ReportMetric(float64(bytes)/float64(entries), "B/entry")
}
