package agent

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble"

	sm "shoal/statemachine"
	"shoal/wire"
)

// PebbleStore is the Store of a real agent: one pebble database in the data
// directory. It uses the pebble that dragonboat pins, so the binary links one
// pebble.
//
// Keys: "n" node ID, "m" meta (cursor, seqs), "t" + 8-byte big-endian task
// ID, "s" + uvarint length + service + 4-byte big-endian version.
type PebbleStore struct {
	db *pebble.DB
}

var (
	keyNode = []byte("n")
	keyMeta = []byte("m")
	keyJoin = []byte("k")
)

const (
	prefixTask = 't'
	prefixSpec = 's'
)

// OpenPebbleStore opens (or creates) the store in dir.
func OpenPebbleStore(dir string) (*PebbleStore, error) {
	db, err := pebble.Open(dir, &pebble.Options{
		MemTableSize: 4 << 20, // an agent's state is small
		Logger:       quietLogger{},
	})
	if err != nil {
		return nil, fmt.Errorf("agent: open the local state in %s: %w", dir, err)
	}
	return &PebbleStore{db: db}, nil
}

// Load reads the whole store.
func (s *PebbleStore) Load() (*State, error) {
	st := &State{}
	it := s.db.NewIter(nil)
	for ok := it.First(); ok; ok = it.Next() {
		k, v := it.Key(), it.Value()
		var err error
		switch {
		case string(k) == string(keyNode):
			if len(v) != 4 {
				err = ErrCorrupt
				break
			}
			st.NodeID = sm.NodeID(binary.BigEndian.Uint32(v))
		case string(k) == string(keyJoin):
			st.JoinKey = string(v)
		case string(k) == string(keyMeta):
			st.Meta, err = decodeMeta(v)
		case k[0] == prefixTask:
			var r TaskRecord
			if r, err = decodeTask(v); err == nil {
				st.Tasks = append(st.Tasks, r)
			}
		case k[0] == prefixSpec:
			var sp wire.Spec
			if sp, err = decodeSpec(v); err == nil {
				st.Specs = append(st.Specs, sp)
			}
		}
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("agent: local state key %q: %w", k, err)
		}
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("agent: read the local state: %w", err)
	}
	return st, nil
}

// Apply commits w as one batch, synced to disk when w.Sync is set.
func (s *PebbleStore) Apply(w *Writes) error {
	if w.Empty() {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	var err error
	set := func(k, v []byte) {
		if err == nil {
			err = b.Set(k, v, nil)
		}
	}
	del := func(k []byte) {
		if err == nil {
			err = b.Delete(k, nil)
		}
	}
	if w.Meta != nil {
		set(keyMeta, encodeMeta(w.Meta))
	}
	for i := range w.Tasks {
		set(taskKey(w.Tasks[i].Assignment.Task), encodeTask(&w.Tasks[i]))
	}
	for _, id := range w.Deleted {
		del(taskKey(id))
	}
	for i := range w.Specs {
		set(specKey(SpecKey{w.Specs[i].Service, w.Specs[i].Version}), encodeSpec(&w.Specs[i]))
	}
	for _, k := range w.DeletedSpecs {
		del(specKey(k))
	}
	if err == nil {
		opt := pebble.NoSync
		if w.Sync {
			opt = pebble.Sync
		}
		err = b.Commit(opt)
	}
	if err != nil {
		return fmt.Errorf("agent: write the local state: %w", err)
	}
	return nil
}

// SaveNodeID stores id, synced.
func (s *PebbleStore) SaveNodeID(id sm.NodeID) error {
	if err := s.db.Set(keyNode, binary.BigEndian.AppendUint32(nil, uint32(id)), pebble.Sync); err != nil {
		return fmt.Errorf("agent: save the node ID: %w", err)
	}
	return nil
}

// SaveJoinKey stores key, synced.
func (s *PebbleStore) SaveJoinKey(key string) error {
	if err := s.db.Set(keyJoin, []byte(key), pebble.Sync); err != nil {
		return fmt.Errorf("agent: save the join key: %w", err)
	}
	return nil
}

// Close flushes and closes the database.
func (s *PebbleStore) Close() error {
	err := s.db.Close()
	if errors.Is(err, pebble.ErrClosed) {
		return nil
	}
	return err
}

func taskKey(id sm.TaskID) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixTask}, uint64(id))
}

func specKey(k SpecKey) []byte {
	b := binary.AppendUvarint([]byte{prefixSpec}, uint64(len(k.Service)))
	return binary.BigEndian.AppendUint32(append(b, k.Service...), k.Version)
}

// quietLogger drops pebble's informational lines; errors still reach the
// caller as returned errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{}) {}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
