package loadgen

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"shoal/loadgen/report"
)

// faults injects agent faults and leader kills until ctx ends, then heals
// everything: every vanished agent returns, every killed replica restarts.
type faults struct {
	r   *run
	rng *rand.Rand
	mu  sync.Mutex
	// until is when each faulted agent is healthy again (partitions end by
	// themselves; vanished agents return at that time).
	until map[int]time.Time
	// ended is when each agent's latest fault ends (kept after it ended):
	// an agent faulted at or after a leader kill is not timed for it.
	ended  map[int]time.Time
	wg     sync.WaitGroup
	healed chan struct{} // closed when the phase ends: vanished agents return at once
}

func (r *run) runFaults(ctx context.Context) {
	f := &faults{r: r, rng: rand.New(rand.NewPCG(r.cfg.Seed, 0xfa17)), until: map[int]time.Time{},
		ended: map[int]time.Time{}, healed: make(chan struct{})}
	maxFaulted := max(1, int(float64(r.cfg.Agents)*r.cfg.FaultShare))
	tick := time.NewTicker(r.cfg.FaultEvery)
	defer tick.Stop()
	var kill <-chan time.Time
	if r.cl.Owned() && len(r.cl.Replicas) >= 3 && r.cfg.LeaderKillEvery > 0 {
		kt := time.NewTicker(r.cfg.LeaderKillEvery)
		defer kt.Stop()
		kill = kt.C
	}
	for {
		select {
		case <-ctx.Done():
			f.heal()
			return
		case <-kill:
			if killWorthIt(ctx, time.Now()) {
				f.killLeader(ctx)
			}
		case <-tick.C:
			f.agentFault(maxFaulted)
		}
	}
}

// agentFault disconnects an agent for 2–8s or makes it vanish for 3–15s,
// unless maxFaulted agents are already faulted.
func (f *faults) agentFault(maxFaulted int) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, t := range f.until {
		if now.After(t) && !f.r.fleet.Gone(i) {
			delete(f.until, i)
		}
	}
	if len(f.until) >= maxFaulted {
		return
	}
	i := f.rng.IntN(f.r.cfg.Agents)
	if _, busy := f.until[i]; busy {
		return
	}
	if f.rng.IntN(2) == 0 {
		d := f.away(2*time.Second + time.Duration(f.rng.Int64N(int64(6*time.Second))))
		f.r.fleet.Partition(i, d)
		f.until[i], f.ended[i] = now.Add(d), now.Add(d)
		f.r.counts.disconnects.Add(1)
		return
	}
	d := f.away(3*time.Second + time.Duration(f.rng.Int64N(int64(12*time.Second))))
	f.until[i], f.ended[i] = now.Add(d), now.Add(d)
	f.r.counts.vanishes.Add(1)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if !f.r.fleet.Vanish(i) {
			return
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-f.healed:
		case <-f.r.ctx.Done():
		}
		f.r.fleet.Return(i)
	}()
}

// away bounds how long an agent is cut off or vanished by half the
// managers' orphan timeout: past the timeout the managers orphan the
// agent's tasks and free their addresses while its processes still run,
// a double use the checker rightly flags but the faults are not meant to
// make. Half leaves room for the agent's reconnect backoff, which grew
// while it was away.
func (f *faults) away(d time.Duration) time.Duration {
	if o := f.r.cfg.OrphanTimeout; o > 0 {
		return min(d, o/2)
	}
	return d
}

// killMargin is the least time a leader kill needs before its phase ends:
// the killed replica stays down 2 s, and finding the leader takes a status
// round. A kill whose turn comes later (--faults a multiple of
// --leader-kill-every puts the last one at the phase's very end) is not
// made: it used to be reported as "no replica said it leads", its query
// cut short by the phase's end.
const killMargin = 3 * time.Second

// killWorthIt reports whether a leader kill at now leaves killMargin
// before ctx's deadline (none: always).
func killWorthIt(ctx context.Context, now time.Time) bool {
	dl, ok := ctx.Deadline()
	return !ok || dl.Sub(now) >= killMargin
}

// killLeader SIGKILLs the replica leading the cluster group and restarts
// it from its data 2s later.
func (f *faults) killLeader(ctx context.Context) {
	// A busy replica may not answer its status within 2 s: ask again for
	// a few seconds before giving up, and say so (a run without its kill once
	// reported "0 leader kills" and nothing else).
	l := f.r.cl.Leader(ctx)
	for tries := 1; l == nil && tries < 5 && ctx.Err() == nil; tries++ {
		t := time.NewTimer(time.Second) // an election may be under way
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		l = f.r.cl.Leader(ctx)
	}
	if l == nil {
		why := "asked five times (all too busy to answer, or an election under way?)"
		if ctx.Err() != nil {
			why = "and the fault phase ended while the loadgen asked"
		}
		fmt.Fprintf(f.r.cfg.Out, "%5.0fs faults  no replica said it leads, %s; this leader kill is skipped\n",
			time.Since(f.r.start).Seconds(), why)
		return
	}
	live := f.r.fleet.Live()
	// The kill's time is when the signal went: the process of a replica
	// holding 10,000 agents' connections takes a while to exit, and the
	// survivors may elect a leader before it has.
	killed := time.Now()
	if err := f.r.cl.Kill(l); err != nil {
		fmt.Fprintln(f.r.cfg.Out, "loadgen: kill leader:", err)
		return
	}
	kill := f.r.counts.leaderKills.Add(1)
	f.r.profileFailover(int(kill), l.ID)
	fmt.Fprintf(f.r.cfg.Out, "%5.0fs faults  killed the leader, replica %d (SIGKILL) at %s; restarting it in 2s\n",
		time.Since(f.r.start).Seconds(), l.ID, killed.Format("15:04:05.000"))
	// Not in f.wg: it may go on into the next phase (the run's context
	// bounds it).
	go f.timeReconnect(f.r.ctx, killed, live, l.ID)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		select { // the replica stays dead 2s, or until the phase ends
		case <-time.After(2 * time.Second):
		case <-f.healed:
		}
		if err := f.r.cl.Restart(l); err != nil {
			fmt.Fprintln(f.r.cfg.Out, "loadgen: restart replica:", err)
		}
	}()
}

// timeReconnect waits until every agent that was connected when the leader
// was killed (its last heartbeat had succeeded: live) and that the loadgen
// did not fault at any time since has had a heartbeat succeed since the
// kill (so it reached the new leader), and records how long that took by
// the agents' own times (a loadgen that falls behind its polls does not
// stretch it); it gives up after a minute. An agent away on its own fault
// when the leader died, or still coming back from one (its reconnect
// backoff grew while it was cut off), comes back on its own schedule:
// counting it timed the fault, not the failover. The line it prints also
// tells when a replica led again (the earliest time a surviving replica
// says it heard of a leader other than the killed one, gone, after the
// kill) and when half and nine tenths of those agents were back, which
// tells the election from the fleet's return.
func (f *faults) timeReconnect(ctx context.Context, killed time.Time, live []bool, gone uint64) {
	var elected atomic.Int64 // since the kill; 0 until a replica names a new leader
	if f.r.cl != nil {
		go func() {
			for ctx.Err() == nil && time.Since(killed) < time.Minute {
				if since, ok := f.r.cl.FirstLeader(ctx, gone, killed); ok {
					elected.Store(int64(max(since.Sub(killed), time.Nanosecond)))
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	back := map[int]time.Duration{} // agents timed: their first success since the kill
	for ctx.Err() == nil && time.Since(killed) < time.Minute {
		waiting := 0
		beats := f.r.fleet.FirstBeats(killed.UnixNano())
		f.mu.Lock()
		for i := range f.r.cfg.Agents {
			connected := i < len(live) && live[i]
			if end, faulted := f.ended[i]; !connected || (faulted && !end.Before(killed)) {
				delete(back, i) // faulted since: not timed
				continue
			}
			if _, ok := back[i]; ok {
				continue
			}
			if i < len(beats) && beats[i] > killed.UnixNano() {
				back[i] = time.Duration(beats[i] - killed.UnixNano())
				continue
			}
			waiting++
		}
		f.mu.Unlock()
		if waiting == 0 {
			k := killRecovery(time.Duration(elected.Load()), back)
			f.r.recordReconnect(k)
			fmt.Fprintf(f.r.cfg.Out, "%5.0fs faults  every agent reached the new leader %.2fs after the kill (%s)\n",
				time.Since(f.r.start).Seconds(), k.AllSeconds, reconnectSpread(k))
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	fmt.Fprintf(f.r.cfg.Out, "%5.0fs faults  not every agent reached the new leader within a minute of the kill (%s)\n",
		time.Since(f.r.start).Seconds(), reconnectSpread(killRecovery(time.Duration(elected.Load()), back)))
}

// killRecovery sums up how the fleet came back after a leader kill:
// when a replica said it leads again (elected, 0: not seen) and when half,
// nine tenths and all of the agents timed (back) were back.
func killRecovery(elected time.Duration, back map[int]time.Duration) report.KillRecovery {
	k := report.KillRecovery{LedAgainSeconds: elected.Seconds(), Agents: len(back)}
	if len(back) == 0 {
		return k
	}
	at := slices.Sorted(maps.Values(back))
	// by when a share p of them were back: the ceil(p·n)-th to come back
	q := func(p float64) float64 { return at[max(0, int(math.Ceil(p*float64(len(at))))-1)].Seconds() }
	k.HalfSeconds, k.P90Seconds, k.AllSeconds = q(0.5), q(0.9), at[len(at)-1].Seconds()
	return k
}

// reconnectSpread says it in words.
func reconnectSpread(k report.KillRecovery) string {
	lead := "no replica was seen leading again"
	if k.LedAgainSeconds > 0 {
		lead = fmt.Sprintf("a replica led again at %.2fs", k.LedAgainSeconds)
	}
	if k.Agents == 0 {
		return lead
	}
	return fmt.Sprintf("%s; %d agents back: half by %.2fs, 90%% by %.2fs, all by %.2fs", lead, k.Agents, k.HalfSeconds, k.P90Seconds, k.AllSeconds)
}

// heal ends every fault: partitions are lifted, vanished agents return,
// killed replicas restart.
func (f *faults) heal() {
	f.mu.Lock()
	for i := range f.until {
		f.r.fleet.Partition(i, 0)
	}
	f.mu.Unlock()
	close(f.healed)
	f.wg.Wait()
	for _, rep := range f.r.cl.Replicas {
		if !rep.Alive() {
			_ = f.r.cl.Restart(rep)
		}
	}
}
