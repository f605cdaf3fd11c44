package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4/raftio"

	"shoal/route"
	"shoal/statemachine"
)

// dutyLog records which replicas run their leader duty right now.
type dutyLog struct {
	mu      sync.Mutex
	running map[uint64]bool
}

func (d *dutyLog) duty(id uint64) Duty {
	return DutyFunc(func(ctx context.Context) {
		d.set(id, true)
		<-ctx.Done()
		d.set(id, false)
	})
}

func (d *dutyLog) set(id uint64, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.running[id] = on
}

// only reports whether exactly replica id runs the duty.
func (d *dutyLog) only(id uint64) (bool, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for r, on := range d.running {
		if on != (r == id) {
			return false, fmt.Sprintf("duty running on %v, want only on %d", d.running, id)
		}
	}
	return d.running[id], fmt.Sprintf("duty running on %v, want only on %d", d.running, id)
}

// Stopping the leader's NodeHost: the others elect a new leader, writes
// resume, and the leader-only duty moves to the new cluster-group leader.
func TestLeaderLoss(t *testing.T) {
	l := startLocal(t, 3, testConfig(2))
	log := &dutyLog{running: map[uint64]bool{}}
	for _, e := range l.Engines() {
		e.AddDuty(log.duty(e.ReplicaID()))
	}
	old, ok := l.Engine(1).Leader(route.ClusterGroup)
	if !ok {
		t.Fatal("no cluster-group leader after WaitReady")
	}
	eventually(t, 10*time.Second, func() (bool, string) { return log.only(old) })
	submitAll(t, l.Engine(1), addNodes(3))

	before := make(map[uint64]uint64)
	for _, e := range l.Engines() {
		if n, _ := e.LeaderChanges(route.ClusterGroup); n == 0 {
			t.Fatalf("replica %d counts no leader change for the cluster group, yet knows its leader", e.ReplicaID())
		} else {
			before[e.ReplicaID()] = n
		}
	}
	l.Stop(old)
	var rest []*Engine
	var ids []uint64
	for _, e := range l.Engines() {
		rest, ids = append(rest, e), append(ids, e.ReplicaID())
	}
	waitLeaderAmong(t, rest, ids...)
	leader, _ := rest[0].Leader(route.ClusterGroup)
	eventually(t, 10*time.Second, func() (bool, string) { return log.only(leader) })
	// Leader notifications arrive asynchronously, after the leader is
	// known: each survivor counts the new leader within a deadline.
	eventually(t, 10*time.Second, func() (bool, string) {
		for _, e := range rest {
			if n, _ := e.LeaderChanges(route.ClusterGroup); n <= before[e.ReplicaID()] {
				return false, fmt.Sprintf("replica %d: %d leader changes after the leader died, %d before", e.ReplicaID(), n, before[e.ReplicaID()])
			}
		}
		return true, ""
	})

	// Writes to every group go through under the new leaders.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 8 {
		name := fmt.Sprintf("after-loss-%d", i)
		if _, err := rest[i%2].Submit(ctx, statemachine.Command{Kind: statemachine.CmdCreateService,
			Spec: &statemachine.ServiceSpec{Name: name, Replicas: 2}}); err != nil {
			t.Fatalf("write after leader loss: %v", err)
		}
		var found bool
		if err := rest[(i+1)%2].Read(ctx, rest[0].GroupOfService(name), func(s *statemachine.State) { found = s.ServiceByName(name) != nil }); err != nil || !found {
			t.Fatalf("service %s not visible on the other replica (err %v)", name, err)
		}
	}
	if _, err := submitter(rest[0]).Submit(ctx, statemachine.Command{Kind: statemachine.CmdSetNodeStatus, Node: 1, NodeStatus: statemachine.NodeDown}); err != nil {
		t.Fatalf("fanned-out write after leader loss: %v", err)
	}

	// The old leader comes back; the duty runs on exactly one replica, the
	// cluster group's leader.
	if err := l.Restart(old); err != nil {
		t.Fatal(err)
	}
	l.Engine(old).AddDuty(log.duty(old))
	converged(t, l.Engines())
	eventually(t, 10*time.Second, func() (bool, string) {
		cur, ok := rest[0].Leader(route.ClusterGroup)
		if !ok {
			return false, "no cluster-group leader"
		}
		return log.only(cur)
	})
}

// Garbage in the log is rejected by every replica with ErrCorrupt, never
// a panic, and the replicas stay identical. (An entry in a format newer
// than this build's stops the replica instead: TestNewerEntryStopsTheReplica.)
func TestCorruptEntries(t *testing.T) {
	l := startLocal(t, 3, testConfig(1))
	e := l.Engine(1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	submitAll(t, e, addNodes(2))
	valid := encodeEntry(entryStamp{now: 5}, createServices("ok", 1, 1), 0)
	garbage := map[string][]byte{
		"short header":    {entryVersion, 1, 2},
		"unknown version": append([]byte{0}, valid[1:]...),
		"garbage batch":   append(appendEntryHeader(nil, entryStamp{now: 5}), 0xde, 0xad, 0xbe, 0xef),
		"truncated batch": valid[:len(valid)-3],
		"trailing bytes":  append(append([]byte(nil), valid...), 0),
		"huge count":      append(appendEntryHeader(nil, entryStamp{now: 5}), 1, 0xff, 0xff, 0xff, 0xff, 0x0f),
	}
	for name, ent := range garbage {
		for _, g := range []int{route.ClusterGroup, 1} {
			o := e.proposeRaw(ctx, g, ent)
			if o.Failed != nil || !errors.Is(o.Err(), statemachine.ErrCorrupt) {
				t.Errorf("%s in group %d: got %+v, want an ErrCorrupt result", name, g, o)
			}
		}
	}
	// The groups still work, and every replica applied the same things.
	if _, err := e.Submit(ctx, createServices("after-garbage", 1, 3)[0]); err != nil {
		t.Fatal(err)
	}
	converged(t, l.Engines())
}

// Leader changes count a known leader in a new term or another leader,
// never an unknown leader or a repeated notification.
func TestLeaderChangesCount(t *testing.T) {
	l := newLeadership(1, 0, time.Now)
	defer l.close()
	steps := []struct {
		leader, term uint64
		want         uint64
	}{
		{0, 1, 0}, // election under way
		{2, 1, 1}, // 2 elected
		{2, 1, 1}, // repeated
		{0, 2, 1}, // 2 lost it
		{3, 2, 2}, // 3 elected
		{3, 3, 3}, // 3 re-elected in a new term
		{1, 4, 4}, // this replica
	}
	for i, s := range steps {
		l.LeaderUpdated(raftio.LeaderInfo{ShardID: shardID(route.ClusterGroup), LeaderID: s.leader, Term: s.term})
		if got := l.changes[route.ClusterGroup].Load(); got != s.want {
			t.Fatalf("step %d (leader %d, term %d): %d changes, want %d", i, s.leader, s.term, got, s.want)
		}
	}
}

// The cluster group's leader comes with when this replica first heard of
// it in its term (an election or hand-over, or a new term it won again);
// a repeated notification changes nothing, service groups change nothing,
// and with no leader known there is no time either.
func TestClusterLeaderSinceIsWhenThisReplicaHeardOfIt(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	now := t0
	l := newLeadership(1, 2, func() time.Time { return now })
	defer l.close()
	steps := []struct {
		at           time.Duration // the clock at this notification, from t0
		group        int
		leader, term uint64
		want         uint64        // the leader then
		since        time.Duration // from t0; -1: none
	}{
		{0, route.ClusterGroup, 2, 1, 2, 0},                             // 2 leads
		{1 * time.Second, route.ClusterGroup, 1, 2, 1, time.Second},     // this replica won
		{2 * time.Second, 1, 2, 2, 1, time.Second},                      // a service group: no change
		{3 * time.Second, route.ClusterGroup, 1, 2, 1, time.Second},     // repeated: the first time stays
		{4 * time.Second, route.ClusterGroup, 0, 3, 0, -1},              // an election under way
		{5 * time.Second, route.ClusterGroup, 1, 3, 1, 5 * time.Second}, // won again
		{6 * time.Second, route.ClusterGroup, 1, 4, 1, 6 * time.Second}, // re-elected in a new term
		{7 * time.Second, route.ClusterGroup, 3, 4, 3, 7 * time.Second}, // a hand-over to 3 in the term
		{8 * time.Second, route.ClusterGroup, 3, 4, 3, 7 * time.Second}, // repeated
	}
	for i, s := range steps {
		now = t0.Add(s.at)
		l.LeaderUpdated(raftio.LeaderInfo{ShardID: shardID(s.group), LeaderID: s.leader, Term: s.term})
		want := time.Time{}
		if s.since >= 0 {
			want = t0.Add(s.since)
		}
		if leader, since := l.clusterLeader(); leader != s.want || !since.Equal(want) {
			t.Fatalf("step %d (group %d, leader %d, term %d): leader %d since %v, want %d since %v", i, s.group, s.leader, s.term, leader, since, s.want, want)
		}
	}
}
