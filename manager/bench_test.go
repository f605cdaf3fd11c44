package manager

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/statemachine"
	"shoal/wire"
)

// startOne starts a one-replica manager for benchmarks.
func startOne(b *testing.B) *Manager {
	b.Helper()
	m, err := Start(Options{DataDir: b.TempDir(), Groups: 4, RaftLogLevel: "critical", APIAddr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Register(ctx); err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkAPICreateServices: service creates through the HTTP API, 1,000
// per op, 32 clients at once.
func BenchmarkAPICreateServices(b *testing.B) {
	m := startOne(b)
	cl, err := client.New(m.APIAddr)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		var wg sync.WaitGroup
		for w := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := w; j < 1000; j += 32 {
					if _, _, err := cl.CreateService(ctx, client.ServiceSpec{Name: fmt.Sprintf("s%d-%d", i, j), Command: []string{"true"}}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "creates/s")
}

// agentFleet is n simulated nodes registered through the agent endpoints,
// sharing one HTTP client, each holding its assigned tasks.
type agentFleet struct {
	cls   []*client.AgentClient
	nodes []statemachine.NodeID
	sids  []uint64
	tasks [][]statemachine.TaskID
}

func newFleet(b *testing.B, m *Manager, n, tasks int) *agentFleet {
	b.Helper()
	hc := client.SharedHTTP(n + 16)
	f := &agentFleet{}
	ctx := context.Background()
	for i := range n {
		cl, err := client.NewAgentClient([]string{m.APIAddr}, hc)
		if err != nil {
			b.Fatal(err)
		}
		s, err := cl.OpenSession(ctx, &wire.SessionRequest{Node: wire.NodeDescription{Hostname: fmt.Sprintf("n%d", i), CPU: 64000, Memory: 1 << 40}})
		if err != nil {
			b.Fatal(err)
		}
		f.cls, f.nodes, f.sids = append(f.cls, cl), append(f.nodes, s.NodeID), append(f.sids, s.SessionID)
	}
	ucl, _ := client.New(m.APIAddr)
	if _, _, err := ucl.CreateService(ctx, client.ServiceSpec{Name: "bench", Replicas: ptr(uint32(tasks)), Command: []string{"true"}}); err != nil {
		b.Fatal(err)
	}
	f.tasks = make([][]statemachine.TaskID, n)
	deadline := time.Now().Add(60 * time.Second)
	for got := 0; got < tasks; {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d tasks assigned", got, tasks)
		}
		got = 0
		for i, cl := range f.cls {
			a, err := cl.Assignments(ctx, &wire.AssignmentsRequest{NodeID: f.nodes[i], SessionID: f.sids[i]})
			if err != nil {
				b.Fatal(err)
			}
			f.tasks[i] = f.tasks[i][:0]
			for _, t := range a.Tasks {
				f.tasks[i] = append(f.tasks[i], t.Task)
			}
			got += len(a.Tasks)
		}
	}
	return f
}

func ptr[T any](v T) *T { return &v }

// BenchmarkAgentStatusReports: 1,000 agents on their own connections each
// report their tasks through every state up to running, one batch per
// state; reports/s is what the manager absorbs (one replica, 4 groups).
func BenchmarkAgentStatusReports(b *testing.B) {
	m := startOne(b)
	const agents, tasks = 1000, 10000
	f := newFleet(b, m, agents, tasks)
	states := []statemachine.TaskState{statemachine.StateAccepted, statemachine.StatePreparing,
		statemachine.StateReady, statemachine.StateStarting, statemachine.StateRunning}
	b.ResetTimer()
	reports := 0
	for i := range b.N {
		st := states[i%len(states)]
		var wg sync.WaitGroup
		for a := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				batch := &wire.StatusBatch{NodeID: f.nodes[a], SessionID: f.sids[a]}
				for _, t := range f.tasks[a] {
					batch.Reports = append(batch.Reports, wire.StatusReport{Task: t, State: st})
				}
				if _, err := f.cls[a].ReportStatus(context.Background(), batch); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		reports += tasks
	}
	b.ReportMetric(float64(reports)/b.Elapsed().Seconds(), "reports/s")
}

// BenchmarkHeartbeats: heartbeats through the HTTP endpoint to the leader,
// from 1,000 nodes; ns/op is the cost of one heartbeat end to end on this
// machine (client and server share the CPU).
func BenchmarkHeartbeats(b *testing.B) {
	m := startOne(b)
	f := newFleet(b, m, 1000, 1000)
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N/64 + 1
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				a := (w*per + i) % len(f.cls)
				if _, err := f.cls[a].Heartbeat(context.Background(), &wire.Heartbeat{NodeID: f.nodes[a], SessionID: f.sids[a]}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(64*per)/b.Elapsed().Seconds(), "heartbeats/s")
}

// BenchmarkEventStream: a client follows /v1/events from before 10,000
// tasks on 100 nodes went through five states (one replica, 4 groups);
// events/s is what one stream delivers, rendered, encoded and decoded.
func BenchmarkEventStream(b *testing.B) {
	m := startOne(b)
	cl, err := client.New(m.APIAddr)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	_, start, err := cl.Tasks(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	const agents, tasks = 100, 10000
	f := newFleet(b, m, agents, tasks)
	for _, st := range []statemachine.TaskState{statemachine.StateAccepted, statemachine.StatePreparing,
		statemachine.StateReady, statemachine.StateStarting, statemachine.StateRunning} {
		for a := range agents {
			batch := &wire.StatusBatch{NodeID: f.nodes[a], SessionID: f.sids[a]}
			for _, t := range f.tasks[a] {
				batch.Reports = append(batch.Reports, wire.StatusReport{Task: t, State: st})
			}
			if _, err := f.cls[a].ReportStatus(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
	}
	// How many events there are: read until the stream goes quiet.
	total := 0
	{
		c, cancel := context.WithCancel(ctx)
		idle := time.AfterFunc(2*time.Second, cancel)
		_ = cl.Events(c, start, nil, func(client.Event) error {
			total++
			idle.Reset(time.Second)
			return nil
		})
		cancel()
	}
	if total < 5*tasks {
		b.Fatalf("only %d events for %d tasks through five states", total, tasks)
	}
	errDone := fmt.Errorf("all events read")
	b.ResetTimer()
	for range b.N {
		n := 0
		err := cl.Events(ctx, start, nil, func(client.Event) error {
			if n++; n == total {
				return errDone
			}
			return nil
		})
		if err != errDone {
			b.Fatalf("stream ended after %d of %d events: %v", n, total, err)
		}
	}
	b.ReportMetric(float64(b.N*total)/b.Elapsed().Seconds(), "events/s")
}
