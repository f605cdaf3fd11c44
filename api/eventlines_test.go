package api

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"pgregory.net/rapid"

	"shoal/api/client"
	"shoal/internal/jsoncodec"
	"shoal/manager/control"
	"shoal/statemachine"
	"shoal/wire"
)

// referenceStream is an event stream rendered the plain way, as the
// stream did before renders were shared: every change of every page
// rendered for this reader alone into a client.Event, and each event
// encoded as a line.
type referenceStream struct {
	s      *Server
	cursor wire.Cursor
	topics map[string]bool
	from   uint64
	limit  int
}

func (rs *referenceStream) next(buf *bytes.Buffer) (some, ok bool) {
	changes, next, end, ok := rs.s.cfg.Feed.Page(rs.cursor, rs.limit, rs.from)
	rs.from = end
	if !ok || len(changes) == 0 {
		return false, ok
	}
	enc := jsoncodec.NewEncoder(buf)
	for _, ev := range referenceRender(rs.s, changes, rs.topics, rs.cursor) {
		if err := enc.Encode(ev); err != nil {
			panic(err)
		}
	}
	rs.cursor = next
	return true, true
}

func referenceRender(s *Server, changes []control.Change, topics map[string]bool, start wire.Cursor) []client.Event {
	evs := make([]client.Event, 0, len(changes))
	src := make([]control.Change, 0, len(changes))
	byGroup := map[int][]int{}
	tokens := referenceTokens(changes, start)
	for i, c := range changes {
		topic, typ := topicOf(c.Kind)
		if topic == "" || (len(topics) > 0 && !topics[topic]) {
			continue
		}
		ev := client.Event{Group: int(c.Group), Raft: c.Index, Topic: topic, Type: typ, Index: tokens[i]}
		switch topic {
		case "task":
			ev.Key = strconv.FormatUint(uint64(c.Task), 10)
		case "service":
			ev.Key = fmt.Sprintf("%d:%d", c.Group, c.Service)
		case "node":
			ev.Key = strconv.FormatUint(uint64(c.Node), 10)
		}
		byGroup[int(c.Group)] = append(byGroup[int(c.Group)], len(evs))
		evs = append(evs, ev)
		src = append(src, c)
	}
	for g, idx := range byGroup {
		_ = s.reads.ReadLocal(g, func(st *statemachine.State) {
			for _, i := range idx {
				ev, c := &evs[i], src[i]
				switch ev.Topic {
				case "task":
					if t := st.Task(c.Task); t != nil {
						d := renderTask(st, t, false)
						ev.Task = &d
					}
				case "service":
					if svc := st.Service(c.Service); svc != nil {
						d := renderService(g, st, svc)
						ev.Service = &d
						ev.Key = svc.Spec.Name
					}
				case "node":
					if n := st.Node(c.Node); n != nil {
						d := renderNode(n)
						ev.Node = &d
					} else {
						ev.Type = "deleted"
					}
				}
			}
		})
	}
	return evs
}

// referenceTokens makes every change's token on its own.
func referenceTokens(changes []control.Change, start wire.Cursor) []string {
	out := make([]string, len(changes))
	run := append(wire.Cursor(nil), start...)
	for i, c := range changes {
		for len(run) <= int(c.Group) {
			run = append(run, 0)
		}
		if i+1 < len(changes) && changes[i+1].Group == c.Group && changes[i+1].Index == c.Index {
			out[i] = run.Token()
			continue
		}
		run[c.Group] = max(run[c.Group], c.Index)
		out[i] = run.Token()
	}
	return out
}

// eventWorld is one replica's state, its feed and its API server, with
// a history of random commands applied entry by entry.
type eventWorld struct {
	r     *replica
	feed  *control.Feed
	s     *Server
	out   statemachine.Output
	index uint64
	now   int64
}

func newEventWorld(t interface {
	Fatal(...any)
	Cleanup(func())
}, ring int) *eventWorld {
	return newEventWorldAt(t, ring, 1, nil)
}

// newEventWorldAt is newEventWorld with a feed of groups groups whose
// states were applied up to start: a stream's cursor, and so every
// line's resume token, is as long as a cluster of that many groups makes
// it. The world's entries go to group 1, after start[1], and with more
// than one group its state is group 1's.
func newEventWorldAt(t interface {
	Fatal(...any)
	Cleanup(func())
}, ring, groups int, start []uint64) *eventWorld {
	cfg := statemachine.Config{}
	if groups > 1 {
		cfg.Group = 1 // a service group: its tasks get addresses
	}
	w := &eventWorld{r: &replica{st: statemachine.New(cfg), leader: 1}, now: 1_700_000_000e9}
	w.feed = control.NewFeed(groups, start, ring, 16)
	if len(start) > 1 {
		w.index = start[1]
	}
	r := w.r
	s, err := New(Config{Reads: r, Leaders: r, Self: r, Replicas: r, Stats: r, ToGroup: r, Submitter: r, Feed: w.feed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	w.s = s
	return w
}

// apply applies cmds as the next entry and feeds its effects.
func (w *eventWorld) apply(cmds ...statemachine.Command) {
	w.index++
	w.now += 1e6
	w.r.st.Apply(cmds, w.index, w.now, &w.out)
	w.feed.OnApply(1, w.index, w.out.Effects)
}

var eventTopics = []string{"task", "service", "node"}

// randomCommand draws a command that often changes something: nodes come
// and go, services are made, scaled, changed and removed, tasks are placed
// and move through their states.
func (w *eventWorld) randomCommand(t *rapid.T) statemachine.Command {
	st := w.r.st
	node := statemachine.NodeID(rapid.IntRange(1, 4).Draw(t, "node"))
	svc := fmt.Sprintf("s%d", rapid.IntRange(1, 3).Draw(t, "service"))
	var task statemachine.TaskID
	if ids := st.TaskIDs(); len(ids) > 0 {
		task = ids[rapid.IntRange(0, len(ids)-1).Draw(t, "task")]
	}
	switch rapid.IntRange(0, 9).Draw(t, "kind") {
	case 0:
		return statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{ID: node,
			Name: fmt.Sprintf("n%d", node), CPU: 4000, Memory: 1 << 33,
			Labels: map[string]string{"zone": rapid.SampledFrom([]string{"a", "b"}).Draw(t, "zone")}}}
	case 1:
		return statemachine.Command{Kind: statemachine.CmdRemoveNode, Node: node}
	case 2:
		return statemachine.Command{Kind: statemachine.CmdSetAvailability, Node: node,
			Availability: rapid.SampledFrom([]statemachine.Availability{statemachine.AvailActive, statemachine.AvailDrain}).Draw(t, "availability")}
	case 3, 4:
		spec := statemachine.ServiceSpec{Name: svc, Replicas: uint32(rapid.IntRange(0, 4).Draw(t, "replicas")),
			Image: rapid.SampledFrom([]string{"v1", "v2"}).Draw(t, "image")}
		kind := statemachine.CmdCreateService
		if st.ServiceByName(svc) != nil {
			kind = statemachine.CmdUpdateService
		}
		return statemachine.Command{Kind: kind, Spec: &spec}
	case 5:
		return statemachine.Command{Kind: statemachine.CmdRemoveService, Name: svc}
	case 6, 7:
		return statemachine.Command{Kind: statemachine.CmdAssign, Task: task, Node: node}
	default:
		tk := st.Task(task)
		if tk != nil {
			node = tk.Node
		}
		return statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: task, Node: node,
			State: rapid.SampledFrom([]statemachine.TaskState{statemachine.StatePreparing, statemachine.StateStarting,
				statemachine.StateRunning, statemachine.StateFailed, statemachine.StateComplete}).Draw(t, "state")}
	}
}

// Property: whatever the history, and however subscribers with different
// topics, page sizes and starting points interleave their reads with the
// applies, every stream writes, page by page, the bytes the plain
// per-reader rendering writes at the same moment — renders shared among
// streams (and tokens made once per entry) change nothing a reader sees.
func TestSharedEventLinesAreThePerReaderLines(t *testing.T) {
	var lines, objects, hits int // over all histories: the check has something to check
	defer func() {
		t.Logf("%d lines compared, %d with an object, %d renders shared", lines, objects, hits)
		if lines < 1000 || objects < 500 || hits < 100 {
			t.Errorf("the histories made too little to compare")
		}
	}()
	rapid.Check(t, func(rt *rapid.T) {
		w := newEventWorld(t, 1024)
		type sub struct {
			es  *eventStream
			ref *referenceStream
		}
		var subs []sub
		open := func() {
			var topics map[string]bool
			if rapid.Bool().Draw(rt, "filtered") {
				topics = map[string]bool{}
				for _, tp := range eventTopics {
					if rapid.Bool().Draw(rt, "topic "+tp) {
						topics[tp] = true
					}
				}
			}
			limit := rapid.IntRange(1, 40).Draw(rt, "page")
			part := rapid.IntRange(0, 8).Draw(rt, "part") // 0: by bytes (the whole page, here)
			cursor := wire.Cursor(w.feed.Applied())
			w.s.eventLines.opened()
			subs = append(subs, sub{&eventStream{s: w.s, cursor: cursor, topics: topics, limit: limit, part: part},
				&referenceStream{s: w.s, cursor: cursor, topics: topics, limit: limit}})
		}
		open()
		steps := rapid.IntRange(1, 120).Draw(rt, "steps")
		for step := range steps {
			switch k := rapid.IntRange(0, 9).Draw(rt, "step"); {
			case k < 4:
				cmds := make([]statemachine.Command, rapid.IntRange(1, 3).Draw(rt, "batch"))
				for i := range cmds {
					cmds[i] = w.randomCommand(rt)
				}
				w.apply(cmds...)
			case k == 4 && len(subs) < 4:
				open()
			default:
				sb := subs[rapid.IntRange(0, len(subs)-1).Draw(rt, "reader")]
				var got, want bytes.Buffer
				some, ok, err := sb.es.next(&got, nil)
				if err != nil {
					rt.Fatal(err)
				}
				wsome, wok := sb.ref.next(&want)
				if some != wsome || ok != wok || !bytes.Equal(got.Bytes(), want.Bytes()) {
					rt.Fatalf("step %d: stream wrote (some %v, ok %v)\n%s\nthe per-reader rendering (some %v, ok %v)\n%s",
						step, some, ok, got.Bytes(), wsome, wok, want.Bytes())
				}
				if sb.es.cursor.Token() != sb.ref.cursor.Token() {
					rt.Fatalf("step %d: cursor %v, want %v", step, sb.es.cursor, sb.ref.cursor)
				}
				lines += bytes.Count(want.Bytes(), []byte("\n"))
				objects += bytes.Count(want.Bytes(), []byte(`"task":{`)) + bytes.Count(want.Bytes(), []byte(`"service":{`)) +
					bytes.Count(want.Bytes(), []byte(`"node":{`))
			}
		}
		w.s.eventLines.mu.Lock()
		hits += int(w.s.eventLines.mu.hits)
		w.s.eventLines.mu.Unlock()
	})
}

// benchEvents is a world with tasks on nodes and a page of changes to
// them (entries of several changes each, as the scheduler's batches
// make), for the fan-out benchmarks.
func benchEvents(b *testing.B) (*eventWorld, wire.Cursor) {
	w := newEventWorld(b, 1<<16)
	for n := 1; n <= 8; n++ {
		w.apply(statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{ID: statemachine.NodeID(n),
			Name: fmt.Sprintf("node-%d", n), CPU: 1 << 30, Memory: 1 << 50}})
	}
	for i := range 10 {
		w.apply(statemachine.Command{Kind: statemachine.CmdCreateService, Spec: &statemachine.ServiceSpec{
			Name: fmt.Sprintf("svc-%d", i), Replicas: 100, Image: "img"}})
	}
	start := wire.Cursor(w.feed.Applied())
	ids := w.r.st.TaskIDs()
	for i := 0; i < len(ids); i += 8 { // an entry places 8 tasks; each then starts, 8 to an entry
		var assign, run []statemachine.Command
		for _, id := range ids[i:min(i+8, len(ids))] {
			n := statemachine.NodeID(1 + int(id)%8)
			assign = append(assign, statemachine.Command{Kind: statemachine.CmdAssign, Task: id, Node: n})
			run = append(run, statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: id, Node: n, State: statemachine.StateRunning})
		}
		w.apply(assign...)
		w.apply(run...)
	}
	return w, start
}

// BenchmarkEventFanout: subscribers streams, all caught up, read the same
// page of changes (3,000 changes of 1,000 tasks). Reported per change sent
// to one stream: time, the process's CPU time (which a loaded machine
// stretches far less than wall time; the collector's work included) and
// allocations, for the shared rendering and for the plain per-reader one.
func BenchmarkEventFanout(b *testing.B) {
	for _, subscribers := range []int{1, 4, 16} {
		for _, impl := range []string{"shared", "per-reader"} {
			b.Run(fmt.Sprintf("subscribers=%d/%s", subscribers, impl), func(b *testing.B) {
				w, start := benchEvents(b)
				all, _, _ := w.feed.Since(start, 1<<20)
				streams := make([]*eventStream, subscribers)
				for i := range streams {
					streams[i] = &eventStream{s: w.s}
					w.s.eventLines.opened()
				}
				var buf bytes.Buffer
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				cpu := cpuNow()
				b.ResetTimer()
				for range b.N {
					w.apply() // the state moves on: renders of the last round are stale
					for _, es := range streams {
						buf.Reset()
						if impl == "shared" {
							es.cursor, es.from = start, 0
							for { // every page
								some, _, err := es.next(&buf, nil)
								if err != nil {
									b.Fatal(err)
								}
								if !some {
									break
								}
								buf.Reset()
							}
						} else {
							rs := &referenceStream{s: w.s, cursor: start, limit: eventPage}
							rs.next(&buf)
						}
					}
				}
				b.StopTimer()
				cpu = cpuNow() - cpu
				runtime.ReadMemStats(&after)
				sent := float64(b.N * subscribers * len(all))
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/sent, "ns/change")
				b.ReportMetric(float64(cpu.Nanoseconds())/sent, "cpu-ns/change")
				b.ReportMetric(float64(after.Mallocs-before.Mallocs)/sent, "allocs/change")
			})
		}
	}
}

// rampWorld is a replica in a ramp as the loadgen makes one: a hundred
// groups (so a resume token of a few hundred bytes), tasks on a network,
// created a service to an entry (one of 2,048 tasks, four of 512), then
// placed and started 8 to an entry. It returns the world, the cursors
// before the creates and before the ramp, and the ramp's changes (12,288:
// a page and a half).
func rampWorld(tb testing.TB) (w *eventWorld, created, from wire.Cursor, ramp []control.Change) {
	const groups = 100
	start := make([]uint64, groups+1)
	for g := range start {
		start[g] = 40_000 + uint64(g)*997
	}
	w = newEventWorldAt(tb, 1<<16, groups, start)
	w.apply(statemachine.Command{Kind: statemachine.CmdCreateNetwork, NetworkSpec: &statemachine.Network{ID: 1,
		Name: "loadgen-net-0", Subnet: "10.64.0.0/12"}})
	for n := 1; n <= 8; n++ {
		w.apply(statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{ID: statemachine.NodeID(n),
			Name: fmt.Sprintf("loadgen-agent-%05d", n), CPU: 1 << 30, Memory: 1 << 50}})
	}
	created = wire.Cursor(w.feed.Applied())
	for i, n := range []uint32{2048, 512, 512, 512, 512} {
		w.apply(statemachine.Command{Kind: statemachine.CmdCreateService, Spec: &statemachine.ServiceSpec{
			Name: fmt.Sprintf("loadgen-svc-%03d", i), Replicas: n, Image: "registry.local/loadgen/sleeper:1",
			Networks: []string{"loadgen-net-0"}}})
	}
	from = wire.Cursor(w.feed.Applied())
	ids := w.r.st.TaskIDs()
	for i := 0; i < len(ids); i += 8 {
		var assign, run []statemachine.Command
		for _, id := range ids[i:min(i+8, len(ids))] {
			n := statemachine.NodeID(1 + int(id)%8)
			assign = append(assign, statemachine.Command{Kind: statemachine.CmdAssign, Task: id, Node: n})
			run = append(run, statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: id, Node: n, State: statemachine.StateRunning})
		}
		w.apply(assign...)
		w.apply(run...)
	}
	ramp, _, _ = w.feed.Since(from, 1<<20)
	if len(ramp) < eventPage {
		tb.Fatalf("%d changes of %d tasks, want more than a page of %d", len(ramp), len(ids), eventPage)
	}
	return w, created, from, ramp
}

// A stream following a ramp writes it in parts that its buffers hold
// without letting their room go, an entry of thousands of events
// included, and after the first parts its line buffer and render arena
// grow only to fit larger events (a page of eventPage events was
// megabytes, so both were grown from nothing on every page); it writes
// the bytes the plain per-reader rendering writes, page by page.
func TestRampPagesKeepTheirBuffers(t *testing.T) {
	w, created, _, _ := rampWorld(t)
	all, _, _ := w.feed.Since(created, 1<<20)
	var sink bytes.Buffer
	out := newJSONLines(&sink)
	es := &eventStream{s: w.s, cursor: created}
	parts, grown := 0, 0
	var lineCap, arenaCap int
	send := func() error {
		if n := out.buf.Len(); n > keepBuffer {
			t.Fatalf("part %d is %d bytes: more than a stream keeps room for (%d)", parts, n, keepBuffer)
		}
		if err := out.send(); err != nil {
			return err
		}
		if out.buf.Cap() < lineCap || es.page.arena.Cap() < arenaCap {
			t.Fatalf("part %d: the buffers let their room go (%d, %d bytes after %d, %d)", parts,
				out.buf.Cap(), es.page.arena.Cap(), lineCap, arenaCap)
		}
		if out.buf.Cap() != lineCap || es.page.arena.Cap() != arenaCap {
			lineCap, arenaCap = out.buf.Cap(), es.page.arena.Cap()
			if parts > 2 {
				grown++
			}
		}
		parts++
		return nil
	}
	for {
		some, ok, err := es.next(&out.buf, send)
		if err != nil || !ok {
			t.Fatalf("part %d: ok %v, %v", parts, ok, err)
		}
		if !some {
			break
		}
		if err := send(); err != nil {
			t.Fatal(err)
		}
	}
	if lines := bytes.Count(sink.Bytes(), []byte("\n")); lines != len(all) {
		t.Fatalf("%d lines for %d events", lines, len(all))
	}
	// Past the first parts a buffer grows only to fit larger events (the
	// ramp's are larger than the creates').
	if lineCap == 0 || arenaCap == 0 || grown > 2 {
		t.Fatalf("over %d parts the buffers grew %d times after the third part; they keep %d and %d bytes of room",
			parts, grown, lineCap, arenaCap)
	}
	t.Logf("%d events in %d parts; the stream keeps %d + %d bytes of room", len(all), parts, lineCap, arenaCap)

	es = &eventStream{s: w.s, cursor: created}
	ref := &referenceStream{s: w.s, cursor: created, limit: eventPage}
	for page := 0; ; page++ {
		var got, want bytes.Buffer
		some, _, err := es.next(&got, nil)
		if err != nil {
			t.Fatal(err)
		}
		if wsome, _ := ref.next(&want); some != wsome || !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("page %d: the stream wrote %d bytes, the per-reader rendering %d", page, got.Len(), want.Len())
		}
		if !some {
			break
		}
	}
}

// BenchmarkEventRampPage: one stream follows a ramp (rampWorld) and writes
// it page after page, as WriteTo does: each part's lines into the stream's
// buffer, then sent. Reported per event sent: the process's CPU time,
// allocations and bytes allocated, and the bytes written.
func BenchmarkEventRampPage(b *testing.B) {
	w, _, from, all := rampWorld(b)
	var sink countingWriter
	out := newJSONLines(&sink)
	es := &eventStream{s: w.s}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu := cpuNow()
	b.ResetTimer()
	for range b.N {
		w.apply() // the state moves on
		es.cursor, es.from = from, 0
		for {
			some, _, err := es.next(&out.buf, out.send)
			if err != nil {
				b.Fatal(err)
			}
			if !some {
				break
			}
			if err := out.send(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	cpu = cpuNow() - cpu
	runtime.ReadMemStats(&after)
	sent := float64(b.N * len(all))
	b.ReportMetric(float64(cpu.Nanoseconds())/sent, "cpu-ns/event")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/sent, "allocs/event")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/sent, "B-alloc/event")
	b.ReportMetric(float64(sink.n)/sent, "B-sent/event")
}

// countingWriter counts what is written to it.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// cpuNow is the CPU time this process used so far (user and system).
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// lockedReplica is the replica fixture with the engine's locking: applies
// hold the state's lock for writing while they feed the Feed, reads hold
// it for reading.
type lockedReplica struct {
	*replica
	mu sync.RWMutex
}

func (r *lockedReplica) ReadLocal(g int, fn func(*statemachine.State)) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.replica.ReadLocal(g, fn)
}

// Streams reading while entries are applied, sharing renders: every
// stream gets every change it follows, in the feed's order, each line
// whole (run it with -race: the shared bytes are read by several streams
// at once and must never be written again).
func TestConcurrentStreamsShareRendersWhole(t *testing.T) {
	w := newEventWorld(t, 1<<16)
	lr := &lockedReplica{replica: w.r}
	s, err := New(Config{Reads: lr, Leaders: lr, Self: lr, Replicas: lr, Stats: lr, ToGroup: lr, Submitter: lr, Feed: w.feed})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w.s = s
	start := wire.Cursor(w.feed.Applied())
	topics := []map[string]bool{nil, {"task": true}, {"task": true, "service": true}, nil}
	outs := make([]bytes.Buffer, len(topics))
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range topics {
		s.eventLines.opened()
		es := &eventStream{s: s, cursor: start, topics: topics[i], limit: 50}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, changed := w.feed.Changed()
				some, _, err := es.next(&outs[i], nil)
				if err != nil {
					t.Error(err)
					return
				}
				if some {
					continue
				}
				select {
				case <-changed:
				case <-done:
					for { // the rest, once every entry is applied
						if some, _, _ := es.next(&outs[i], nil); !some {
							return
						}
					}
				}
			}
		}()
	}
	for n := 1; n <= 4; n++ {
		lr.mu.Lock()
		w.apply(statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{ID: statemachine.NodeID(n),
			Name: fmt.Sprintf("n%d", n), CPU: 1 << 30, Memory: 1 << 50}})
		lr.mu.Unlock()
	}
	for i := range 5 {
		lr.mu.Lock()
		w.apply(statemachine.Command{Kind: statemachine.CmdCreateService, Spec: &statemachine.ServiceSpec{
			Name: fmt.Sprintf("s%d", i), Replicas: 40, Image: "img"}})
		lr.mu.Unlock()
	}
	lr.mu.RLock()
	ids := w.r.st.TaskIDs()
	lr.mu.RUnlock()
	for _, state := range []statemachine.TaskState{0, statemachine.StatePreparing, statemachine.StateRunning} {
		for i, id := range ids {
			n := statemachine.NodeID(1 + i%4)
			c := statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: id, Node: n, State: state}
			if state == 0 {
				c = statemachine.Command{Kind: statemachine.CmdAssign, Task: id, Node: n}
			}
			lr.mu.Lock()
			w.apply(c)
			lr.mu.Unlock()
		}
	}
	close(done)
	wg.Wait()
	all, _, _ := w.feed.Since(start, 1<<20)
	for i, tp := range topics {
		var want []string
		for _, c := range all {
			if topic, typ := topicOf(c.Kind); topic != "" && (tp == nil || tp[topic]) {
				want = append(want, fmt.Sprintf("%d/%d %s %s", c.Group, c.Index, topic, typ))
			}
		}
		var got []string
		for _, line := range bytes.Split(bytes.TrimSuffix(outs[i].Bytes(), []byte("\n")), []byte("\n")) {
			var ev client.Event
			if err := jsoncodec.Unmarshal(line, &ev); err != nil {
				t.Fatalf("stream %d: line %q: %v", i, line, err)
			}
			if ev.Topic == "node" && ev.Type == "deleted" {
				ev.Type = "changed"
			}
			got = append(got, fmt.Sprintf("%d/%d %s %s", ev.Group, ev.Raft, ev.Topic, ev.Type))
		}
		if len(want) < 500 || !slices.Equal(got, want) {
			t.Fatalf("stream %d (topics %v): %d events, want the feed's %d", i, tp, len(got), len(want))
		}
	}
	s.eventLines.mu.Lock()
	hits := s.eventLines.mu.hits
	s.eventLines.mu.Unlock()
	t.Logf("%d changes, %d renders shared", len(all), hits)
}
