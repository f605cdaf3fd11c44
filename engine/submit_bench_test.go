package engine

import (
	"bytes"
	"context"
	"testing"
	"time"

	"shoal/route"
	"shoal/statemachine"
)

// BenchmarkSubmitRamp: a scheduler run's 100,000 assignments over 16
// groups, from SubmitMany (commands built by the caller, untimed) or
// SubmitAssigns to the entries the proposers hand Raft, without
// Raft: once every group's queue holds its calls, each queue is drained
// into entries at once and every call answered OK. ns/task is per
// assignment submitted.
func BenchmarkSubmitRamp(b *testing.B) {
	const groups, n = 16, 100_000
	e := unproposedEngine(groups)
	cmds := make([]statemachine.Command, n)
	for i := range cmds {
		g := 1 + i%groups
		cmds[i] = statemachine.Command{Kind: statemachine.CmdAssign,
			Task: statemachine.TaskID(uint64(g)<<48 | uint64(1_000_000+i)), Node: statemachine.NodeID(1 + i%2000)}
	}
	ctx := context.Background()
	ok := func(int) route.Outcome { return route.Outcome{} }
	for _, how := range []string{"commands", "assigns"} {
		b.Run(how, func(b *testing.B) {
			entries, bytes := 0, 0
			b.ReportAllocs()
			for b.Loop() {
				done := make(chan []route.Outcome)
				go func() {
					if how == "commands" {
						done <- e.SubmitMany(ctx, cmds)
						return
					}
					done <- e.SubmitAssigns(ctx, n, func(i int) (statemachine.TaskID, statemachine.NodeID) { return cmds[i].Task, cmds[i].Node })
				}()
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
		})
	}
}

// unproposedEngine is an engine of groups whose proposers queue and never
// propose (no loop, no Raft): the caller takes the calls.
func unproposedEngine(groups int) *Engine {
	e := &Engine{cfg: Config{Groups: groups}.withDefaults()}
	for g := 0; g <= groups; g++ {
		p := &proposer{cfg: &e.cfg, group: g, kick: make(chan struct{}, 1), stop: make(chan struct{})}
		p.mu.space = make(chan struct{})
		e.props = append(e.props, p)
	}
	return e
}

// The entry SubmitMany's calls become is the one encodeEntry writes for the
// group's commands in submission order (the bytes Raft carries are what
// they were when every command was encoded with its entry); a command that
// cannot be routed or encoded gets its rejection and the rest go on.
func TestSubmitManyEntryIsTheBatchEncoding(t *testing.T) {
	e := unproposedEngine(2)
	task := func(g, n uint64) statemachine.TaskID { return statemachine.TaskID(g<<48 | n) }
	cmds := []statemachine.Command{
		{Kind: statemachine.CmdAssign, Task: task(1, 7), Node: 3},
		{Kind: statemachine.CmdTaskStatus, Task: task(2, 8), Node: 3, State: statemachine.StateFailed, ExitCode: -9, Message: "oom"},
		{Kind: statemachine.CmdAssign, Task: task(9, 1), Node: 3}, // no group 9
		{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{ID: 4, Name: "n4", Labels: map[string]string{"zone": "a"}}},
		{Kind: statemachine.CmdCreateService, State: statemachine.TaskState(200), Spec: &statemachine.ServiceSpec{Name: "x"}},
		{Kind: statemachine.CmdAssign, Task: task(1, 9), Node: 4},
	}
	want := map[int][]statemachine.Command{1: {cmds[0], cmds[5]}, 2: {cmds[1]}, 0: {cmds[3]}}
	done := make(chan []route.Outcome)
	go func() { done <- e.SubmitMany(context.Background(), cmds) }()
	for g := range want {
		<-e.props[g].kick
	}
	now := time.Unix(0, 42)
	for g, batch := range want {
		p := e.props[g]
		calls, size, _ := p.take()
		if rest, _, _ := p.take(); rest != nil {
			t.Fatalf("group %d: a second entry of %d calls", g, len(rest))
		}
		got := p.entry(calls, size, now, now.Add(time.Second))
		st := entryStamp{now: now.UnixNano(), notAfter: now.Add(time.Second).UnixNano() + int64(e.cfg.ClockBound)}
		if w := encodeEntry(st, batch, 0); !bytes.Equal(got, w) {
			t.Fatalf("group %d entry:\n%x\nwant\n%x", g, got, w)
		}
		p.finish(calls, size, func(i int) route.Outcome { return route.Outcome{Result: statemachine.Result{ID: uint64(10*g + i)}} })
	}
	out := <-done
	for i, wantOut := range []struct {
		code statemachine.Code
		id   uint64
	}{{statemachine.CodeOK, 10}, {statemachine.CodeOK, 20}, {statemachine.CodeNotFound, 0}, {statemachine.CodeOK, 0},
		{statemachine.CodeInvalid, 0}, {statemachine.CodeOK, 11}} {
		if o := out[i]; o.Failed != nil || o.Result.Code != wantOut.code || o.Result.ID != wantOut.id {
			t.Errorf("command %d: %+v, want code %v id %d", i, o, wantOut.code, wantOut.id)
		}
	}
}

// BenchmarkDecodeEntry: a replica's decoding of one entry of 4,096
// assignments, into a new batch per entry (as every replica did) and
// into the array the last entry used (as replica.Update does now).
func BenchmarkDecodeEntry(b *testing.B) {
	const n = 4096
	batch := make([]statemachine.Command, n)
	for i := range batch {
		batch[i] = statemachine.Command{Kind: statemachine.CmdAssign,
			Task: statemachine.TaskID(uint64(1+i%16)<<48 | uint64(1_000_000+i)), Node: statemachine.NodeID(1 + i%2000)}
	}
	ent := encodeEntry(entryStamp{now: 1}, batch, 0)
	for _, reuse := range []bool{false, true} {
		name := map[bool]string{false: "new", true: "reused"}[reuse]
		b.Run(name, func(b *testing.B) {
			var buf []statemachine.Command
			b.ReportAllocs()
			for b.Loop() {
				_, got, err := decodeEntryInto(buf, ent)
				if err != nil || len(got) != n {
					b.Fatal(len(got), err)
				}
				if reuse {
					clear(got)
					buf = got[:0]
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/command")
		})
	}
}

// SubmitAssigns writes the entries SubmitMany writes for the same
// assignments as commands, and answers each the same.
func TestSubmitAssignsIsSubmitMany(t *testing.T) {
	tasks := []statemachine.TaskID{1<<48 | 7, 2<<48 | 8, 9<<48 | 1, 1<<48 | 9} // no group 9
	nodes := []statemachine.NodeID{3, 4, 5, 6}
	entries := twoGroupEntries
	ctx := context.Background()
	wantEnts, wantOut := entries(func(e *Engine) []route.Outcome {
		cmds := make([]statemachine.Command, len(tasks))
		for i := range cmds {
			cmds[i] = statemachine.Command{Kind: statemachine.CmdAssign, Task: tasks[i], Node: nodes[i]}
		}
		return e.SubmitMany(ctx, cmds)
	})
	gotEnts, gotOut := entries(func(e *Engine) []route.Outcome {
		return e.SubmitAssigns(ctx, len(tasks), func(i int) (statemachine.TaskID, statemachine.NodeID) { return tasks[i], nodes[i] })
	})
	for g := 1; g <= 2; g++ {
		if !bytes.Equal(gotEnts[g], wantEnts[g]) {
			t.Fatalf("group %d entry:\n%x\nwant\n%x", g, gotEnts[g], wantEnts[g])
		}
	}
	for i := range wantOut {
		if gotOut[i] != wantOut[i] {
			t.Fatalf("assignment %d: %+v, want %+v", i, gotOut[i], wantOut[i])
		}
	}
	if wantOut[2].Result.Code != statemachine.CodeNotFound || wantOut[3].Result.ID != 11 {
		t.Fatalf("outcomes %+v", wantOut)
	}
}

// twoGroupEntries runs submit on an engine of two service groups whose
// proposers are stepped by hand, and returns the entry each group wrote
// and the outcomes submit returned (group g's i-th call answered ID 10g+i).
func twoGroupEntries(submit func(e *Engine) []route.Outcome) (map[int][]byte, []route.Outcome) {
	e := unproposedEngine(2)
	done := make(chan []route.Outcome)
	go func() { done <- submit(e) }()
	ents := map[int][]byte{}
	for g := 1; g <= 2; g++ {
		p := e.props[g]
		<-p.kick
		calls, size, _ := p.take()
		ents[g] = p.entry(calls, size, time.Unix(0, 1), time.Unix(0, 2))
		p.finish(calls, size, func(i int) route.Outcome { return route.Outcome{Result: statemachine.Result{ID: uint64(10*g + i)}} })
	}
	return ents, <-done
}
