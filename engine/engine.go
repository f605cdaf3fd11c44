package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/raftio"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"shoal/route"
	"shoal/statemachine"
)

// Engine is one replica of every group, hosted by one dragonboat NodeHost.
// Its methods are safe for concurrent use.
type Engine struct {
	cfg   Config
	nh    *dragonboat.NodeHost
	props []*proposer // index: group
	lead  *leadership
	// reads shares read-index barriers between concurrent reads.
	reads *barriers
	// seen is what this replica heard from its peers (the hand-over's
	// choice of target, the commit index a transfer target waits for).
	seen *heard
	// reps are this replica's state machines, by group.
	reps []atomic.Pointer[replica]
	// done is closed when the engine closes; bg counts the goroutines of
	// its own (campaigns, held TimeoutNows) that Close waits for before it
	// closes the NodeHost, and closing stops spawn from starting more.
	done    chan struct{}
	bg      sync.WaitGroup
	bgMu    sync.Mutex
	closing bool
	// local hands messages to this replica's Raft as the transport does
	// (their batches carry deployment).
	local      raftio.MessageHandler
	deployment uint64
	// gone holds the Raft addresses of departed peers whose groups this
	// replica is still seeing led again (leaderGone).
	gone sync.Map

	closeOnce sync.Once
}

// Open starts this replica of the cluster group and every service group.
// It returns once the groups are started, not once they have leaders (see
// WaitReady).
func Open(cfg Config) (*Engine, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, fresh, err := resolveMeta(&cfg)
	if err != nil {
		return nil, err
	}
	// Nothing is written before the Raft address is known good.
	if err := checkAddr("Raft address", cfg.RaftAddr); err != nil {
		return nil, err
	}
	if err := checkBind(cfg.RaftAddr); err != nil {
		return nil, err
	}
	if fresh {
		if m.Pending {
			cfg.Logf("engine: %s never started (an earlier start failed); starting it afresh", cfg.DataDir)
			if err := resetPending(cfg.DataDir); err != nil {
				return nil, err
			}
		}
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("engine: create data dir: %w", err)
		}
		m = meta{Version: 1, Groups: cfg.Groups, ReplicaID: cfg.ReplicaID, RaftAddr: cfg.RaftAddr, Peers: cfg.Peers,
			Joined: cfg.Join, Pending: true}
		if err := writeMeta(cfg.DataDir, m); err != nil {
			return nil, err
		}
	}
	if cfg.OnOpen != nil {
		cfg.OnOpen(cfg.Groups)
	}
	e, err := start(cfg)
	if err != nil {
		if fresh {
			err = fmt.Errorf("%w (%s never started: the next start resets it, so correct the settings and start again)", err, cfg.DataDir)
		}
		return nil, err
	}
	if fresh {
		m.Pending = false
		if err := writeMeta(cfg.DataDir, m); err != nil {
			e.Close()
			return nil, err
		}
	}
	return e, nil
}

// start opens the NodeHost and starts every group in it.
func start(cfg Config) (*Engine, error) {
	peers := cfg.Peers
	if len(peers) == 0 { // a directory recorded before peers were kept
		peers = map[uint64]string{cfg.ReplicaID: cfg.RaftAddr}
	}
	if cfg.Join {
		// Added to running groups: the members come from their leaders.
		peers = nil
	}
	setLogLevel(cfg.RaftLogLevel)
	e := &Engine{cfg: cfg, lead: newLeadership(cfg.ReplicaID, cfg.Groups, cfg.Clock.Now),
		seen: newHeard(cfg.Groups+1, answerGap*time.Duration(cfg.HeartbeatRTT)*cfg.RTT, cfg.Clock.Now),
		reps: make([]atomic.Pointer[replica], cfg.Groups+1), done: make(chan struct{})}
	e.reads = e.newBarriers()
	nhc := e.nodeHostConfig()
	e.deployment = nhc.GetDeploymentID()
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		e.lead.close()
		return nil, fmt.Errorf("engine: start raft host at %s in %s: %w", cfg.RaftAddr, cfg.DataDir, err)
	}
	e.nh = nh
	for g := 0; g <= cfg.Groups; g++ {
		create := func(shard, _ uint64) sm.IConcurrentStateMachine {
			r := newReplica(groupOf(shard), cfg.Groups, cfg.OnApply)
			r.onRecover = cfg.OnRecover
			r.onDiverge = cfg.OnDiverge
			e.reps[groupOf(shard)].Store(r)
			return r
		}
		if err := nh.StartConcurrentReplica(peers, cfg.Join, create, e.raftConfig(g)); err != nil {
			e.Close()
			if errors.Is(err, dragonboat.ErrInvalidShardSettings) {
				if cfg.Join {
					return nil, fmt.Errorf("%w: group %d of %s was started as an initial member, not by a join: start it without --join: %w", ErrDataDir, g, cfg.DataDir, err)
				}
				return nil, fmt.Errorf("%w: group %d was created with other peers than %v: %w", ErrDataDir, g, peers, err)
			}
			return nil, fmt.Errorf("engine: start group %d: %w", g, err)
		}
	}
	e.props = make([]*proposer, cfg.Groups+1)
	for g := range e.props {
		e.props[g] = newProposer(nh, &e.cfg, g, e.lead)
	}
	if e.local != nil {
		e.spawn(func() { e.campaignAlone(e.local) })
	}
	return e, nil
}

// Close stops the proposers (queued submissions fail with ErrClosed), the
// duties and the NodeHost. It is safe to call more than once.
func (e *Engine) Close() {
	e.closeOnce.Do(func() {
		e.bgMu.Lock()
		e.closing = true
		close(e.done)
		e.bgMu.Unlock()
		e.bg.Wait()
		for _, p := range e.props {
			p.close()
		}
		e.lead.close()
		if e.nh != nil {
			e.nh.Close()
		}
	})
}

// spawn runs f in a goroutine Close waits for, unless the engine is
// closing (then f does not run, and spawn returns false). f must return
// soon after done closes.
func (e *Engine) spawn(f func()) bool {
	e.bgMu.Lock()
	defer e.bgMu.Unlock()
	if e.closing {
		return false
	}
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		f()
	}()
	return true
}

// ReplicaID returns this replica's Raft ID.
func (e *Engine) ReplicaID() uint64 { return e.cfg.ReplicaID }

// RaftAddr returns the address this replica serves Raft on.
func (e *Engine) RaftAddr() string { return e.cfg.RaftAddr }

// Groups returns the number of service groups (the cluster group is extra).
func (e *Engine) Groups() int { return e.cfg.Groups }

// GroupOfService returns the service group that owns a service.
func (e *Engine) GroupOfService(name string) int { return route.ServiceGroup(name, e.cfg.Groups) }

// AddDuty registers leader-only work; it starts at once if this replica
// leads the cluster group now.
func (e *Engine) AddDuty(d Duty) { e.lead.add(d) }

// Leading reports whether this replica's duties are running: it leads the
// cluster group as far as it knows.
func (e *Engine) Leading() bool { return e.lead.leading() }

// ClusterLeader returns the cluster group's leader as this replica was
// last told (0 while none is known) and when it first heard of that
// leader in its term (an election or hand-over it learned of; for itself,
// when it won).
func (e *Engine) ClusterLeader() (leader uint64, since time.Time) { return e.lead.clusterLeader() }

// Leader returns the leader of a group as this replica knows it (ok=false
// while unknown).
func (e *Engine) Leader(group int) (replicaID uint64, ok bool) {
	id, _, ok, err := e.nh.GetLeaderID(shardID(group))
	if err != nil || !ok || id == 0 {
		return 0, false
	}
	return id, true
}

// LeaderChanges returns how many leaders this replica has learned of for
// a group since it started (each election or hand-over that it saw
// complete counts one; the first leader counts too), and the current
// term as it knows it.
func (e *Engine) LeaderChanges(group int) (changes, term uint64) {
	if group < 0 || group > e.cfg.Groups {
		return 0, 0
	}
	return e.lead.changes[group].Load(), e.lead.terms[group].Load()
}

// WaitReady waits until every group has a known leader.
func (e *Engine) WaitReady(ctx context.Context) error {
	for {
		if e.allLed() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("engine: waiting for leaders: %w", ctx.Err())
		case <-e.cfg.Clock.After(e.cfg.RTT):
		}
	}
}

// Submit routes one command, waits until it is applied on this replica and
// returns its result; the error is the command's rejection (wrapping a
// statemachine sentinel) or why it was not applied (ErrTimeout, ...).
func (e *Engine) Submit(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error) {
	o := e.SubmitMany(ctx, []statemachine.Command{cmd})[0]
	return o.Result, o.Err()
}

// SubmitMany routes every command to its group, queues them behind
// whatever is already queued there, and waits for all of them. Commands for
// one group keep their order. Node and network commands are the cluster
// group's: SubmitMany returns once the cluster group applied them and
// leaves their delivery to the service groups to the caller (the outbox
// duty re-drives it; duty.Submitter also checks removals first and
// delivers before it returns). If ctx ends first, the commands not yet
// applied report ctx's error (they may still be applied later).
func (e *Engine) SubmitMany(ctx context.Context, cmds []statemachine.Command) []route.Outcome {
	return e.submit(ctx, len(cmds), func(i int) *statemachine.Command { return &cmds[i] })
}

// SubmitAssigns is SubmitMany of n CmdAssign commands, the i-th moving
// task at(i) to its node, for a caller that holds assignments rather than
// commands (the scheduler's run: a hundred thousand commands of 200 bytes
// each built only to be encoded).
func (e *Engine) SubmitAssigns(ctx context.Context, n int, at func(i int) (statemachine.TaskID, statemachine.NodeID)) []route.Outcome {
	var c statemachine.Command
	return e.submit(ctx, n, func(i int) *statemachine.Command {
		task, node := at(i)
		c = statemachine.Command{Kind: statemachine.CmdAssign, Task: task, Node: node}
		return &c
	})
}

// SubmitStatuses is SubmitMany of n CmdTaskStatus commands from node, the
// i-th reporting at(i) (task, state, exit code, message), for a caller that
// holds an agent's reports rather than commands (a status batch: no
// 184-byte command per report built, or kept, only to be encoded).
func (e *Engine) SubmitStatuses(ctx context.Context, node statemachine.NodeID, n int,
	at func(i int) (statemachine.TaskID, statemachine.TaskState, int32, string)) []route.Outcome {
	var c statemachine.Command
	return e.submit(ctx, n, func(i int) *statemachine.Command {
		task, state, exit, msg := at(i)
		c = statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: task, Node: node, State: state, ExitCode: exit, Message: msg}
		return &c
	})
}

// submit is SubmitMany of the n commands cmd returns (each read once, in
// order, and not kept past the next call).
func (e *Engine) submit(ctx context.Context, n int, cmd func(i int) *statemachine.Command) []route.Outcome {
	out := make([]route.Outcome, n)
	w := &waiter{out: out, done: make(chan struct{})}
	// The submitter's deadline, on the clock entries are stamped with
	// (a context's deadline is the wall clock's).
	var notAfter int64
	if d, ok := ctx.Deadline(); ok {
		notAfter = e.cfg.Clock.Now().Add(time.Until(d)).UnixNano()
	}
	// Each command goes to one group (route.Groups) and is encoded once,
	// checked, into buf, which the entry's encoding copies from; its call
	// holds only where its bytes are. A scheduler run's hundred thousand
	// assignments were copied three times before as 250-byte calls.
	var buf []byte
	if n > 1 {
		buf = make([]byte, 0, 24*n)
	}
	type routed struct{ group, end int32 } // group -1: rejected
	at := make([]routed, n)
	counts := make([]int32, e.cfg.Groups+1)
	var rejected []int
	var targets [1]int
	for i := range n {
		c := cmd(i)
		gs, rej := route.Groups(c, e.cfg.Groups, targets[:0])
		if rej.Code == statemachine.CodeOK {
			buf, rej = statemachine.AppendChecked(buf, c)
		}
		if rej.Code != statemachine.CodeOK || len(gs) != 1 {
			if rej.Code == statemachine.CodeOK {
				rej = statemachine.Result{Code: statemachine.CodeInvalid, Msg: c.Kind.String() + " cannot be routed"}
			}
			out[i].Result = rej
			at[i] = routed{group: -1, end: int32(len(buf))}
			rejected = append(rejected, i)
			continue
		}
		at[i] = routed{group: int32(gs[0]), end: int32(len(buf))}
		counts[gs[0]]++
	}
	if len(rejected) == n {
		return out
	}
	w.left.Store(int32(n - len(rejected)))
	perGroup := make([][]call, e.cfg.Groups+1)
	for g, n := range counts {
		if n > 0 {
			perGroup[g] = make([]call, 0, n)
		}
	}
	start := int32(0)
	for i, a := range at {
		if a.group >= 0 {
			perGroup[a.group] = append(perGroup[a.group], call{enc: buf[start:a.end:a.end], w: w, slot: i, notAfter: notAfter})
		}
		start = a.end
	}
	for g, calls := range perGroup {
		if len(calls) == 0 {
			continue
		}
		if err := e.props[g].enqueue(ctx, calls); err != nil {
			for _, c := range calls {
				w.deliver(c.slot, route.Outcome{Failed: err})
			}
		}
	}
	select {
	case <-w.done:
		return out
	case <-ctx.Done():
		// out stays the waiter's (a late result may still land in it): the
		// caller gets a copy with the rejections it read before.
		late := make([]route.Outcome, n)
		for i := range late {
			late[i] = route.Outcome{Failed: ctx.Err()}
		}
		for _, i := range rejected {
			late[i] = out[i]
		}
		return late
	}
}

// Read runs fn over a group's state once this replica has applied
// everything committed before Read was called (a linearizable ReadIndex
// read). fn runs under the group's read lock: it must be quick and must not
// keep or modify anything it sees. Without a deadline in ctx, Read gives up
// after Config.ProposeTimeout. A read index asked of a leader that dies or
// hands over is asked again of the new leader as soon as one is known.
// Concurrent reads of a group share their barriers (see barriers).
func (e *Engine) Read(ctx context.Context, group int, fn func(*statemachine.State)) error {
	if err := e.checkGroup(group); err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.cfg.ProposeTimeout)
		defer cancel()
	}
	backoff := e.cfg.RTT
	for {
		err := e.readOnce(ctx, group, fn)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !temporary(err) || errors.Is(err, dragonboat.ErrClosed) {
			return fmt.Errorf("engine: read group %d: %w", group, err)
		}
		if errors.Is(err, errLeaderChanged) {
			continue
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("engine: read group %d: %w (last: %w)", group, ctx.Err(), err)
		case <-e.cfg.Clock.After(backoff):
		}
		backoff = min(2*backoff, 20*e.cfg.RTT)
	}
}

// errLeaderChanged ends a read index request that a newer leader should
// answer; it counts as temporary.
var errLeaderChanged = fmt.Errorf("leader changed: %w", dragonboat.ErrAborted)

// readOnce waits for the group's next read-index barrier (see barriers)
// and, once it is applied here, runs fn.
func (e *Engine) readOnce(ctx context.Context, group int, fn func(*statemachine.State)) error {
	b := e.reads.join(group)
	select {
	case <-b.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if b.err != nil {
		return b.err
	}
	// What is applied here now includes the barrier's index.
	_, err := e.nh.StaleRead(shardID(group), readFunc(fn))
	return err
}

// ReadLocal runs fn over this replica's state of a group as applied so far,
// which may lag the leader (a stale read). The rules for fn are Read's.
func (e *Engine) ReadLocal(group int, fn func(*statemachine.State)) error {
	if err := e.checkGroup(group); err != nil {
		return err
	}
	_, err := e.nh.StaleRead(shardID(group), readFunc(fn))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, dragonboat.ErrShardNotInitialized):
		return fmt.Errorf("%w: group %d: %w", ErrNotReady, group, err)
	case errors.Is(err, dragonboat.ErrClosed):
		return ErrClosed
	}
	return fmt.Errorf("engine: local read of group %d: %w", group, err)
}

func (e *Engine) checkGroup(group int) error {
	if group < 0 || group > e.cfg.Groups {
		return fmt.Errorf("engine: %w: %d (this cluster has 0..%d)", route.ErrNoGroup, group, e.cfg.Groups)
	}
	return nil
}

// GroupStatus is a summary of one group on this replica.
type GroupStatus struct {
	Group     int    `json:"group"`
	Leader    uint64 `json:"leader"` // 0 when unknown
	LastIndex uint64 `json:"last_index"`
	Hash      uint64 `json:"hash"`
	Services  int    `json:"services"`
	Tasks     int    `json:"tasks"`
	Nodes     int    `json:"nodes"`
}

// Status summarizes every group as this replica has applied it. Hashing
// encodes the whole state: use it for checks, not on a hot path.
func (e *Engine) Status() ([]GroupStatus, error) {
	out := make([]GroupStatus, e.cfg.Groups+1)
	for g := range out {
		gs := &out[g]
		gs.Group = g
		gs.Leader, _ = e.Leader(g)
		err := e.ReadLocal(g, func(s *statemachine.State) {
			gs.LastIndex, gs.Hash = s.LastIndex(), s.Hash()
			gs.Services, gs.Tasks, gs.Nodes = len(s.ServiceIDs()), s.NumTasks(), len(s.NodeIDs())
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ClockBound is the bound on clock error between replicas that every
// entry's deadline includes (Config.ClockBound).
func (e *Engine) ClockBound() time.Duration { return e.cfg.ClockBound }
