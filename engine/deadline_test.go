package engine

import (
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"time"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"shoal/internal/clock"
	"shoal/statemachine"
)

// An entry that reaches the log after its deadline is refused on every
// replica, even in a group nobody writes to: the group's leader keeps its
// replicated time moving, so a proposal forwarded long ago and delivered
// late meets a time past its deadline.
func TestLateEntryRefusedInAnIdleGroup(t *testing.T) {
	cfg := testConfig(1)
	cfg.Clock = clock.Real{} // the beat compares times a stepping clock would not advance while idle
	cfg.TimeBeat = 0         // the default: an election timeout
	l := startLocal(t, 3, cfg)
	e := l.Engine(1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	submitAll(t, e, addNodes(1))

	// Nobody writes to service group 1; its time still moves.
	var t0 int64
	if err := e.Read(ctx, 1, func(st *statemachine.State) { t0 = st.LastTime() }); err != nil {
		t.Fatal(err)
	}
	every := time.Duration(e.cfg.ElectionRTT) * e.cfg.RTT
	eventually(t, 10*every, func() (bool, string) {
		var now int64
		if err := e.Read(ctx, 1, func(st *statemachine.State) { now = st.LastTime() }); err != nil {
			return false, err.Error()
		}
		return now > t0+int64(every), "the idle group's replicated time to move past an election timeout"
	})

	// A service create proposed (and timed out) long ago arrives now.
	var last int64
	if err := e.Read(ctx, 1, func(st *statemachine.State) { last = st.LastTime() }); err != nil {
		t.Fatal(err)
	}
	late := encodeEntry(entryStamp{now: last - int64(20*time.Second), notAfter: last - int64(5*time.Second)},
		createServices("late", 1, 1), 0)
	o := e.proposeRaw(ctx, 1, late)
	if o.Failed != nil || o.Result.Code != statemachine.CodeExpired {
		t.Fatalf("a late entry got %+v, want CodeExpired", o)
	}
	for _, r := range l.Engines() {
		eventually(t, 10*time.Second, func() (bool, string) {
			found := true
			err := r.Read(ctx, 1, func(st *statemachine.State) { found = st.ServiceByName("late-0") != nil })
			return err == nil && !found, "every replica to have applied past the late entry without creating its service"
		})
	}
	converged(t, l.Engines())
}

// An entry written by a build before deadlines (format 1: version, time,
// batch) still decodes, with no deadline; a format-2 entry keeps both
// times.
func TestEntryFormatsDecode(t *testing.T) {
	batch := createServices("old", 1, 2)
	v1 := append([]byte{entryVersionV1}, binary.LittleEndian.AppendUint64(nil, 77)...)
	v1 = statemachine.AppendBatch(v1, batch)
	st, got, err := decodeEntry(v1)
	if err != nil || st != (entryStamp{now: 77}) || len(got) != 1 || got[0].Spec.Name != "old-0" {
		t.Fatalf("format 1: stamp %+v, %d commands, err %v", st, len(got), err)
	}
	st, got, err = decodeEntry(encodeEntry(entryStamp{now: 5, notAfter: 9}, batch, 0))
	if err != nil || st != (entryStamp{now: 5, notAfter: 9}) || len(got) != 1 {
		t.Fatalf("format 2: stamp %+v, %d commands, err %v", st, len(got), err)
	}
}

// An entry in a format newer than this build knows (a newer entry format,
// or a newer batch version) stops the replica with a message saying so,
// instead of being skipped: a skip would part it from replicas that read
// the entry. Corrupt bytes of a known format are still a no-op everywhere.
func TestNewerEntryStopsTheReplica(t *testing.T) {
	batch := createServices("new", 1, 2)
	ok := encodeEntry(entryStamp{now: 5, notAfter: 9}, batch, 0)
	newerEntry := append([]byte{entryVersion + 1}, ok[1:]...)
	newerBatch := slices.Clone(ok)
	newerBatch[entryHeaderLen]++ // the batch version byte
	for name, cmd := range map[string][]byte{"entry format": newerEntry, "batch version": newerBatch} {
		r := newReplica(1, 2, nil)
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, "written by a newer version of Shoal") {
					t.Errorf("%s: recovered %q, want the replica to stop saying so", name, msg)
				}
			}()
			r.Update([]sm.Entry{{Index: 1, Cmd: cmd}})
		}()
	}
	r := newReplica(1, 2, nil)
	ents, err := r.Update([]sm.Entry{{Index: 1, Cmd: []byte{entryVersion, 1, 2}}})
	if err != nil || ents[0].Result.Value != resultCorrupt {
		t.Fatalf("corrupt entry: result %+v, err %v; want a no-op answered corrupt", ents[0].Result, err)
	}
}
