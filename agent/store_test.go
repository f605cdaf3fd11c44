package agent

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	sm "shoal/statemachine"
	"shoal/wire"
)

func sampleRecord(id sm.TaskID) TaskRecord {
	a := asg(id, sm.DesiredRunning)
	a.Addresses = []wire.Address{{Network: "front", Addr: "10.0.0.5/24"}}
	return TaskRecord{Assignment: a,
		Status:  wire.StatusReport{Task: id, State: sm.StateFailed, ExitCode: -3, Message: "exit 3", At: 12345},
		Acked:   wire.StatusReport{Task: id, State: sm.StateRunning, At: 99},
		Handle:  Handle{Pid: 4242, StartTime: 1 << 40},
		Removed: id%2 == 0, Destroy: true}
}

// storeConformance runs the same checks against any Store; reopen returns
// the store as a restarted agent would find it.
func storeConformance(t *testing.T, s Store, reopen func() Store) {
	st, err := s.Load()
	if err != nil || st.NodeID != 0 || len(st.Tasks) != 0 {
		t.Fatalf("empty store: %+v %v", st, err)
	}
	if err := s.SaveNodeID(7); err != nil {
		t.Fatal(err)
	}
	w := &Writes{Sync: true, Meta: &Meta{Cursor: wire.Cursor{0, 5, 9}, Seqs: []uint64{0, 3, 4}},
		Tasks: []TaskRecord{sampleRecord(2), sampleRecord(1), sampleRecord(300)},
		Specs: []wire.Spec{webSpec, {Service: "db", Version: 2, Env: []string{"A=1"}, Dir: "/tmp"}}}
	if err := s.Apply(w); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(&Writes{Deleted: []sm.TaskID{2}, DeletedSpecs: []SpecKey{{"db", 2}}}); err != nil {
		t.Fatal(err)
	}
	s = reopen()
	st, err = s.Load()
	if err != nil {
		t.Fatal(err)
	}
	want := &State{NodeID: 7, Meta: *w.Meta, Specs: []wire.Spec{webSpec},
		Tasks: []TaskRecord{sampleRecord(1), sampleRecord(300)}}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("loaded\n%+v\nwant\n%+v", st, want)
	}
}

func TestMemStore(t *testing.T) {
	s := NewMemStore()
	storeConformance(t, s, func() Store { return s })
}

func TestPebbleStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := OpenPebbleStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	storeConformance(t, s, func() Store {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if s, err = OpenPebbleStore(dir); err != nil {
			t.Fatal(err)
		}
		return s
	})
	// A damaged record is reported, not loaded as garbage.
	if err := s.db.Set(taskKey(5), []byte{recordVersion, 0xff}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load of a damaged record: %v", err)
	}
	s.Close()
}

func TestRecordRoundTrip(t *testing.T) {
	r := sampleRecord(77)
	got, err := decodeTask(encodeTask(&r))
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("%+v %v", got, err)
	}
	b := encodeTask(&r)
	for i := range b { // every truncation is an error, never a panic
		if _, err := decodeTask(b[:i]); err == nil {
			t.Fatalf("a record cut at %d bytes decoded", i)
		}
	}
}

// FuzzDecodeRecords: the store's decoders are total — any bytes give a
// value or ErrCorrupt, never a panic.
func FuzzDecodeRecords(f *testing.F) {
	r := sampleRecord(3)
	f.Add(encodeTask(&r))
	f.Add(encodeSpec(&webSpec))
	f.Add(encodeMeta(&Meta{Cursor: wire.Cursor{1, 2}, Seqs: []uint64{3}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := decodeTask(b); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatal(err)
		}
		if _, err := decodeSpec(b); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatal(err)
		}
		if _, err := decodeMeta(b); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatal(err)
		}
	})
}

func TestLockDataDir(t *testing.T) {
	dir := t.TempDir()
	release, err := LockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockDataDir(dir); !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("second lock: %v, want ErrDataDirInUse", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	release, err = LockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	release()
}

// BenchmarkPebbleAckedStatuses measures acknowledged statuses persisted per
// second: one batch per status batch the manager answered, as the runner
// writes them, synced or not.
func BenchmarkPebbleAckedStatuses(b *testing.B) {
	for _, c := range []struct {
		name  string
		batch int
		sync  bool
	}{{"batch=1/nosync", 1, false}, {"batch=1/sync", 1, true}, {"batch=64/nosync", 64, false},
		{"batch=64/sync", 64, true}, {"batch=1024/nosync", 1024, false}, {"batch=1024/sync", 1024, true}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := OpenPebbleStore(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			recs := make([]TaskRecord, c.batch)
			for i := range recs {
				recs[i] = sampleRecord(sm.TaskID(i + 1))
			}
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				for j := range recs {
					recs[j].Acked.At = int64(i)
				}
				if err := s.Apply(&Writes{Tasks: recs, Sync: c.sync}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*c.batch)/time.Since(start).Seconds(), "statuses/s")
		})
	}
}

// The MemStore keeps its own copy of a record's addresses, also when it
// keeps the copy it has (the addresses did not change): writing through
// the caller's slice afterwards changes nothing stored.
func TestMemStoreKeepsItsOwnAddresses(t *testing.T) {
	s := NewMemStore()
	rec := func(state sm.TaskState) TaskRecord {
		return TaskRecord{Assignment: wire.Assignment{Task: 1, Service: "web", Addresses: []wire.Address{{Network: "front", Addr: "10.0.0.5/16"}}},
			Status: wire.StatusReport{Task: 1, State: state}}
	}
	for _, state := range []sm.TaskState{sm.StateAssigned, sm.StatePreparing, sm.StateRunning} {
		w := Writes{Tasks: []TaskRecord{rec(state)}}
		if err := s.Apply(&w); err != nil {
			t.Fatal(err)
		}
		w.Tasks[0].Assignment.Addresses[0].Addr = "10.9.9.9/16"
		got, ok := s.Task(1)
		if !ok || got.Status.State != state || got.Assignment.Addresses[0].Addr != "10.0.0.5/16" {
			t.Fatalf("after the %v write: stored %+v", state, got)
		}
	}
}

// The store keeps its own copy of the position: the machine rewrites the
// Meta it hands to Apply at its next Ready.
func TestMemStoreKeepsItsOwnMeta(t *testing.T) {
	s := NewMemStore()
	for _, c := range []uint64{5, 6} {
		w := Writes{Meta: &Meta{Cursor: wire.Cursor{c, 1}, Seqs: []uint64{c}}}
		if err := s.Apply(&w); err != nil {
			t.Fatal(err)
		}
		w.Meta.Cursor[0], w.Meta.Seqs[0] = 99, 99
		st, err := s.Load()
		if err != nil {
			t.Fatal(err)
		}
		if st.Meta.Cursor.Get(0) != c || st.Meta.Seqs[0] != c {
			t.Fatalf("stored %+v after writing %d and rewriting the caller's", st.Meta, c)
		}
	}
}
