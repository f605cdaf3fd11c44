package fleet

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/rpc"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"shoal/agent"
	"shoal/api/client"
	"shoal/wire"
)

// The fleet in a process of its own. The simulated agents take most of a
// loadgen's CPU; in the loadgen's own process they left the goroutine that
// reads the event stream a sliver of it (the Go scheduler is fair among
// goroutines, not among jobs), and under a 100k ramp the loadgen's view
// fell tens of thousands of tasks behind with megabytes of events waiting
// in its socket. In a child process the agents compete with the loadgen
// at the operating system's level instead, as real agents on other
// machines would not compete at all.
//
// The loadgen drives the child over its stdin and stdout with net/rpc
// (Remote calls, Service answers), and the child streams what its agents
// observe (Observer calls) to file descriptor 3, in the order they
// happened, in batches (obscodec.go).

// ChildConfig is what the loadgen hands a fleet child (as JSON in the
// environment variable ConfigEnv: it holds the worker token).
type ChildConfig struct {
	Managers []string
	Token    string
	First    int // the fleet-wide index of this child's first agent
	Agents   int
	Seed     uint64
	Sim      agent.SimConfig
	AgentLog string // the agents' warnings and errors go here ("": discarded)
	// Setups is how many connection set-ups the agents of every fleet
	// process on this machine run at once per CPU, together
	// (client.LimitSetups): 0 takes SetupsPerCPU, below 0 none is
	// bounded. Shares is how many fleet processes share them (0: one):
	// each process takes its share.
	Setups, Shares int
	// CPUProfile, if set, is where the child writes its CPU profiles, one
	// per window of the run: "%d" in it becomes the child's number (Remote
	// does that), then "%s" the window's name: "setup" from the child's
	// start (joins, first TLS handshakes) until the loadgen's ramp starts,
	// "ramp" over the ramp, "rest" after it (Profile). `go tool pprof`
	// given all three merges them into the whole run.
	CPUProfile string
	// AllocsProfile, if set (with CPUProfile), is where the child writes
	// its allocations ("allocs") as each window ends, counted from its
	// start ("%d" and "%s" as in CPUProfile): the ramp's own are
	// `go tool pprof -diff_base SETUP RAMP`.
	AllocsProfile string
}

// ConfigEnv names the environment variable that carries a ChildConfig.
const ConfigEnv = "SHOAL_LOADGEN_FLEET"

// ParseChildConfig reads a ChildConfig from its environment value.
func ParseChildConfig(v string) (ChildConfig, error) {
	var c ChildConfig
	if v == "" {
		return c, errors.New("this command is started by shoal loadgen, which hands it its configuration")
	}
	if err := json.Unmarshal([]byte(v), &c); err != nil {
		return c, fmt.Errorf("the fleet configuration from shoal loadgen is not valid: %w", err)
	}
	return c, nil
}

// obs is one observation of an agent (Observer).
type obs struct {
	Kind  uint8 // obsHanded, obsHold, obsRelease
	Node  uint32
	Task  uint64
	Nets  []string
	Addrs []string
	At    int64 // unix nanoseconds, as the agent saw it
	// Stamp orders observations across children: the wall clock in unix
	// nanoseconds when the observation entered its child's queue, rising
	// within a child.
	Stamp int64
}

// obsBatch is one flush of a child's queue. Upto is a promise: every later
// observation of this child is stamped after it. Batches go out every few
// milliseconds even when empty, so the loadgen can merge children's
// observations in stamp order (multi.go) without waiting long.
type obsBatch struct {
	Upto int64
	Obs  []obs
}

const (
	obsHanded uint8 = iota
	obsHold
	obsRelease
	obsGone // made by the loadgen: the process's agents died with it (multi.go)
)

// obsWriter is behind the child's Observer: it queues observations in call
// order and a flusher sends them in batches. Agents wait while the queue
// is full (the loadgen reads too slowly), so nothing is dropped; the
// queue holds millions, since an agent waits there in the middle of its
// work (its executor, under its lock): with 65,536 a million-task ramp
// made agents wait so long for the loadgen that their heartbeats stopped
// for up to 47 s, and the leader expired them.
//
// The queue is a list of chunks of obsChunk observations, and the flusher
// hands the chunks it sent back for reuse: a queue in one slice, grown by
// appending while the loadgen lagged, copied itself at every doubling and
// was dropped after each big flush, a sixth of the simulated agents'
// allocations in a ramp.
type obsWriter struct {
	mu      sync.Mutex
	cond    *sync.Cond
	limit   int
	queue   [][]obs // chunks, in order; only the last is not full
	n       int     // observations queued
	free    [][]obs // empty chunks to fill next
	last    int64   // the latest stamp given or promised
	closed  bool
	flushed chan struct{}
	now     func() time.Time // the process's clock (a worker's may be offset for tests)
}

// obsChunk is how many observations a chunk of the queue holds (about
// 80 bytes each).
const obsChunk = 1024

// obsQueueMax is a child's queue limit: some 4 million observations
// (about 150 bytes each while queued).
const obsQueueMax = 1 << 22

func newObsWriter(w io.Writer, limit int) *obsWriter {
	o := &obsWriter{flushed: make(chan struct{}), limit: limit, now: time.Now}
	o.cond = sync.NewCond(&o.mu)
	go o.flush(w)
	return o
}

func (o *obsWriter) add(x obs) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.n >= o.limit && !o.closed {
		o.cond.Wait()
	}
	if o.closed {
		return
	}
	x.Stamp = o.stampLocked(o.now().UnixNano())
	o.queueLocked(x)
}

// addHanded queues that the agent of node was handed tasks, in order,
// under one lock and one reading of the clock: an assignments answer
// hands over several tasks, and an observation each taking the lock that
// every agent of the process shares was a contended lock per task.
func (o *obsWriter) addHanded(node uint32, tasks []wire.Assignment, at int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now().UnixNano()
	for i := range tasks {
		for o.n >= o.limit && !o.closed {
			o.cond.Wait()
		}
		if o.closed {
			return
		}
		o.queueLocked(obs{Kind: obsHanded, Node: node, Task: uint64(tasks[i].Task), At: at, Stamp: o.stampLocked(now)})
	}
}

// queueLocked appends x, stamped, to the queue.
func (o *obsWriter) queueLocked(x obs) {
	if k := len(o.queue); k == 0 || len(o.queue[k-1]) == cap(o.queue[k-1]) {
		var c []obs
		if f := len(o.free); f > 0 {
			c, o.free = o.free[f-1], o.free[:f-1]
		} else {
			c = make([]obs, 0, obsChunk)
		}
		o.queue = append(o.queue, c)
	}
	k := len(o.queue) - 1
	o.queue[k] = append(o.queue[k], x)
	o.n++
	if o.n == o.limit {
		o.cond.Broadcast() // for whoever waits for a full queue (waitFull)
	}
}

// waitFull waits until the queue is full: the loadgen has stopped reading
// and the next observation makes its agent wait.
func (o *obsWriter) waitFull() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.n < o.limit && !o.closed {
		o.cond.Wait()
	}
}

// stampLocked returns now, the wall clock, above every stamp already
// given.
func (o *obsWriter) stampLocked(now int64) int64 {
	o.last = max(o.last+1, now)
	return o.last
}

// obsSink is an Observer that hands each observation to a function.
type obsSink func(obs)

func (f obsSink) Handed(node uint32, task uint64, now time.Time) {
	f(obs{Kind: obsHanded, Node: node, Task: task, At: now.UnixNano()})
}

func (f obsSink) Hold(node uint32, task uint64, nets, addrs []string, now time.Time) {
	f(obs{Kind: obsHold, Node: node, Task: task, Nets: nets, Addrs: addrs, At: now.UnixNano()})
}

func (f obsSink) Release(task uint64, now time.Time) {
	f(obs{Kind: obsRelease, Task: task, At: now.UnixNano()})
}

// writerSink is the Observer of a child's agents: its observations go to
// the child's queue, an assignments answer's hand-overs together
// (handedAll).
type writerSink struct {
	obsSink
	w *obsWriter
}

func newWriterSink(w *obsWriter) writerSink { return writerSink{obsSink(w.add), w} }

func (s writerSink) HandedAll(node uint32, tasks []wire.Assignment, now time.Time) {
	s.w.addHanded(node, tasks, now.UnixNano())
}

// flush sends the queue every few milliseconds until close: a batch per
// chunk, each but the last promising no more than its own last stamp.
func (o *obsWriter) flush(w io.Writer) {
	defer close(o.flushed)
	bw := bufio.NewWriterSize(w, 256<<10)
	enc := newObsEncoder(bw)
	var chunks [][]obs // the chunks being sent; their slice is reused
	for {
		time.Sleep(10 * time.Millisecond)
		o.mu.Lock()
		chunks = append(chunks[:0], o.queue...)
		clear(o.queue)
		o.queue, o.n = o.queue[:0], 0
		upto := o.stampLocked(o.now().UnixNano())
		closed := o.closed
		if closed {
			upto = math.MaxInt64 // nothing follows
		}
		o.cond.Broadcast()
		o.mu.Unlock()
		var err error
		for i, c := range chunks {
			b := obsBatch{Obs: c, Upto: upto}
			if i < len(chunks)-1 {
				b.Upto = c[len(c)-1].Stamp
			}
			if err = enc.encode(b); err != nil {
				break
			}
		}
		if len(chunks) == 0 {
			err = enc.encode(obsBatch{Upto: upto})
		}
		if err != nil || bw.Flush() != nil {
			o.close()
			return
		}
		if closed {
			return
		}
		o.mu.Lock()
		for _, c := range chunks {
			clear(c) // keep no references for the collector
			if len(o.free) < obsSpareMax/obsChunk {
				o.free = append(o.free, c[:0])
			}
		}
		o.mu.Unlock()
		clear(chunks)
	}
}

// obsSpareMax is how many observations the chunks kept for reuse hold at
// most: a burst's room is not kept for good.
const obsSpareMax = 1 << 16

// close stops taking observations; the flusher sends what is queued.
func (o *obsWriter) close() {
	o.mu.Lock()
	o.closed = true
	o.cond.Broadcast()
	o.mu.Unlock()
}

// Service is the fleet's net/rpc service in the child.
type Service struct {
	f    *Fleet
	prof *cpuProfile
}

// cpuProfile is the child's CPU profile: one file per window of the run
// (ChildConfig.CPUProfile). A process has one CPU profile at a time, so a
// window's file ends where the next begins.
type cpuProfile struct {
	mu      sync.Mutex
	pattern string // "%s": the window's name
	allocs  string // ChildConfig.AllocsProfile
	window  string // under way
	f       *os.File
}

// start ends the window under way (if any) and profiles the next into its
// own file; with no pattern it does nothing.
func (p *cpuProfile) start(window string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pattern == "" {
		return nil
	}
	if err := p.stopLocked(); err != nil {
		return err
	}
	f, err := os.Create(fmt.Sprintf(p.pattern, window))
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	p.f, p.window = f, window
	return nil
}

func (p *cpuProfile) stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopLocked()
}

// stopLocked ends the window under way: its CPU profile, then the
// allocations until its end.
func (p *cpuProfile) stopLocked() error {
	if p.f == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := p.f.Close()
	p.f = nil
	if p.allocs != "" {
		f, cerr := os.Create(fmt.Sprintf(p.allocs, p.window))
		if cerr != nil {
			return errors.Join(err, cerr)
		}
		err = errors.Join(err, pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
		if name, ok := strings.CutSuffix(p.allocs, ".allocs.prof"); ok {
			err = errors.Join(err, os.WriteFile(fmt.Sprintf(name+".counts.txt", p.window), windowCounts(), 0o644))
		}
	}
	return err
}

// windowCounts is what the process did since its start that a profile
// does not count: collector cycles, heap allocations, and what the
// agents' TLS dialers did (client.Dials), one "name value" per line; a
// window's own are the difference with the window before.
func windowCounts() []byte {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/allocs:objects"}}
	metrics.Read(s)
	d := &client.Dials
	var b []byte
	for _, kv := range []struct {
		k string
		v uint64
	}{
		{"gc-cycles", s[0].Value.Uint64()}, {"alloc-bytes", s[1].Value.Uint64()}, {"alloc-objects", s[2].Value.Uint64()},
		{"dials-started", uint64(d.Started.Load())}, {"dials-resuming", uint64(d.Resuming.Load())},
		{"dials-given-up", uint64(d.GivenUp.Load())}, {"dials-taken-over", uint64(d.TakenOver.Load())}, {"dials-dropped", uint64(d.Dropped.Load())},
	} {
		b = fmt.Appendf(b, "%s %d\n", kv.k, kv.v)
	}
	return b
}

// PartitionArgs cuts agent I off for D.
type PartitionArgs struct {
	I int
	D time.Duration
}

// CrashArgs crashes up to N running tasks of agent I.
type CrashArgs struct{ I, N int }

// ProbeArgs asks what node's store keeps for Task.
type ProbeArgs struct {
	Node uint32
	Task uint64
}

// ProbeAnswer is what an agent of the child keeps for the task; Found is
// false when no agent of the child runs as the node.
type ProbeAnswer struct {
	Text  string
	Found bool
}

func (s *Service) Partition(a PartitionArgs, _ *bool) error { s.f.Partition(a.I, a.D); return nil }
func (s *Service) Vanish(i int, out *bool) error            { *out = s.f.Vanish(i); return nil }
func (s *Service) Return(i int, _ *bool) error              { s.f.Return(i); return nil }
func (s *Service) Gone(i int, out *bool) error              { *out = s.f.Gone(i); return nil }
func (s *Service) Connected(_ int, out *int) error          { *out = s.f.Connected(); return nil }
func (s *Service) BeatAge(_ int, out *time.Duration) error  { *out = s.f.BeatAge(); return nil }
func (s *Service) Live(_ int, out *[]bool) error            { *out = s.f.Live(); return nil }
func (s *Service) Nodes(_ int, out *[]uint32) error         { *out = s.f.Nodes(); return nil }
func (s *Service) Crash(a CrashArgs, out *int) error        { *out = s.f.Crash(a.I, a.N); return nil }
func (s *Service) Probe(a ProbeArgs, out *ProbeAnswer) error {
	out.Text, out.Found = s.f.Probe(a.Node, a.Task)
	return nil
}
func (s *Service) Stop(_ int, _ *bool) error { s.f.Stop(); return nil }

// Profile ends the CPU profile's window under way and starts the named one
// (ChildConfig.CPUProfile); a child that profiles nothing ignores it.
func (s *Service) Profile(window string, _ *bool) error { return s.prof.start(window) }
func (s *Service) SyncNow(within time.Duration, _ *bool) error {
	s.f.SyncNow(within)
	return nil
}
func (s *Service) FirstBeats(since int64, out *[]int64) error {
	*out = s.f.FirstBeats(since)
	return nil
}

// CPU answers the CPU seconds the process has used (user and system).
func (s *Service) CPU(_ int, out *float64) error {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return err
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	*out = tv(ru.Utime) + tv(ru.Stime)
	return nil
}

// SetupsPerCPU is how many connection set-ups (a join, a TLS handshake)
// the fleet processes of a machine run at once per CPU, together: enough
// to cover the round trips to the managers, few enough that each finishes
// well within its deadline when a process gets a small share of the
// machine. The bound is the machine's, not each process's: the set-ups
// of all of them share its CPUs and the managers. 32 per process per
// CPU, which is what four processes of 2,500 agents each take now, took a
// 10,000-agent failover from 40 to 12 s; but one process of 1,000 agents
// then had 64 turns for its reconnects, which wait on round trips more
// than on CPU, and they took 14 s instead of 6 (perf/NOTEBOOK.md).
const SetupsPerCPU = 128

// setupTurns is how many set-ups a process runs at once: its share of the
// machine's (per per CPU, cpus CPUs, shares processes), at least one;
// per < 0: no bound (0).
func setupTurns(per, cpus, shares int) int {
	per = cmp.Or(per, SetupsPerCPU)
	if per < 0 {
		return 0
	}
	return max(per*cpus/max(shares, 1), 1)
}

// Serve runs a fleet child: the fleet cfg describes, driven by calls read
// from in (answers to out), its observations written to obsOut, until in
// closes (the loadgen ended or died).
func Serve(ctx context.Context, cfg ChildConfig, in io.Reader, out io.WriteCloser, obsOut io.Writer, fc Config) error {
	ow := newObsWriter(obsOut, obsQueueMax)
	if fc.Clock != nil {
		ow.now = fc.Clock.Now
	}
	fc.Managers, fc.Token, fc.First, fc.Agents, fc.Seed, fc.Sim, fc.Observer = cfg.Managers, cfg.Token, cfg.First, cfg.Agents, cfg.Seed, cfg.Sim, newWriterSink(ow)
	prof := &cpuProfile{pattern: cfg.CPUProfile, allocs: cfg.AllocsProfile}
	if err := prof.start("setup"); err != nil {
		return err
	}
	defer func() { _ = prof.stop() }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Its agents set up their connections (joins, TLS handshakes) a few
	// at a time, as agents on hosts of their own do (client.LimitSetups).
	if n := setupTurns(cfg.Setups, runtime.GOMAXPROCS(0), cfg.Shares); n > 0 {
		client.LimitSetups(n)
	}
	f, err := Start(ctx, fc)
	if err != nil {
		return err
	}
	srv := rpc.NewServer()
	if err := srv.RegisterName("Fleet", &Service{f: f, prof: prof}); err != nil {
		return err
	}
	srv.ServeConn(struct {
		io.Reader
		io.WriteCloser
	}{in, out})
	f.Stop()
	ow.close()
	<-ow.flushed
	return nil
}
