package statemachine

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"

	"shoal/ipam"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"
)

// snapshotMagic opens every canonical encoding; the last byte is the format
// version: 7 adds each service spec's labels and rollback configuration
// (decodeSpec); 6 (still read, a spec's rollback as its update
// configuration) ends with the request records (requests.go); 5 (still read,
// with none) ends with the join keys (joinkeys.go); 4 (still read, with
// none) fences block requests per group and network; 3 (still read,
// its per-group fences kept as floors) ends with the outbox and lease
// state (outbox_enc.go); 2 (still
// read, with an empty outbox) records the last applied time after the last
// index; 1 (still read, as time 0) did not.
const (
	snapshotMagic   = "SHOALSM\x07"
	snapshotMagicV6 = "SHOALSM\x06"
	snapshotMagicV5 = "SHOALSM\x05"
	snapshotMagicV4 = "SHOALSM\x04"
	snapshotMagicV3 = "SHOALSM\x03"
	snapshotMagicV2 = "SHOALSM\x02"
	snapshotMagicV1 = "SHOALSM\x01"
)

// flushAt is how much canonical encoding is buffered before it is written.
const flushAt = 1 << 20

// Save writes the whole state, zstd-compressed, to w: the format Load
// reads.
func (s *State) Save(w io.Writer) error { return compressTo(w, s.writeCanonical) }

// SaveCanonical writes a Canonical encoding captured earlier in Save's
// format, so a replica can capture the state quickly under its lock and
// compress it outside (the one snapshot writer: Save and the engine's
// snapshots both end here).
func SaveCanonical(w io.Writer, canon []byte) error {
	return compressTo(w, func(zw io.Writer) error {
		_, err := zw.Write(canon)
		return err
	})
}

// compressTo runs write over a zstd stream to w.
func compressTo(w io.Writer, write func(io.Writer) error) error {
	zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return fmt.Errorf("statemachine: save: %w", err)
	}
	if err := write(zw); err != nil {
		zw.Close()
		return fmt.Errorf("statemachine: save: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("statemachine: save: %w", err)
	}
	return nil
}

// Hash returns a digest of the canonical encoding: equal states (and only
// those, up to hash collisions) have equal hashes.
func (s *State) Hash() uint64 {
	h := xxhash.New()
	_ = s.writeCanonical(h) // a hash never fails to write
	return h.Sum64()
}

// Canonical returns the uncompressed canonical encoding: what Hash digests,
// what SaveCanonical compresses into a snapshot (the engine captures it
// under the replica's lock), and FromCanonical's input (the model
// checker's state copies).
func (s *State) Canonical() []byte { return s.canonicalWith(poolCodec{}) }

func (s *State) canonicalWith(pc poolCodec) []byte {
	var buf bytes.Buffer
	_ = s.writeCanonicalWith(&buf, pc)
	return buf.Bytes()
}

// poolCodec encodes and decodes the address pools inside the canonical
// encoding. The zero codec uses the pools' own MarshalBinary and
// UnmarshalBinary; the model checker's (mcPools) keeps the encodings of
// pools that no state changes any more, and one pool per encoding.
type poolCodec struct {
	// encode returns p's encoding; shared: no state changes p any more.
	encode func(p *ipam.Pool, shared bool) ([]byte, error)
	// decode returns the pool that raw encodes; shared: other states
	// may hold it, so the decoded state copies it before a change.
	decode func(raw string) (p *ipam.Pool, shared bool, err error)
}

func (s *State) writeCanonical(w io.Writer) error { return s.writeCanonicalWith(w, poolCodec{}) }

func (s *State) writeCanonicalWith(w io.Writer, pc poolCodec) error {
	e := encoder{b: make([]byte, 0, 1024)}
	flush := func(force bool) error {
		if len(e.b) < flushAt && !force {
			return nil
		}
		_, err := w.Write(e.b)
		e.b = e.b[:0]
		return err
	}
	if err := s.encodeHead(&e, pc); err != nil {
		return err
	}
	// Tasks in ID order: the store ranges over them in that order.
	for _, t := range s.tasks.all() {
		encodeTask(&e, t)
		if err := flush(false); err != nil {
			return err
		}
	}
	s.encodeTail(&e)
	return flush(true)
}

// encodeHead encodes everything before the tasks, ending with their count.
// The snapshot stream (snapshot_stream.go) captures it whole: the tasks
// are most of a state.
func (s *State) encodeHead(e *encoder, pc poolCodec) error {
	e.b = append(e.b, snapshotMagic...)
	e.u(uint64(s.cfg.Group))
	e.u(uint64(s.cfg.Groups))
	// Where every format kept Config.HistoryRetention: the task history
	// limit, now a cluster setting (settings.go) in the same place.
	e.u(uint64(s.settings.TaskHistoryLimit))
	e.bool(s.cfg.ManualReactions)
	e.u(s.lastIndex)
	e.i(s.lastTime)
	e.u(s.nextTask)
	e.u(uint64(s.nextService))
	// When timers are next looked at is part of the state: a pass changes
	// what it finds due, so every replica must make it at the same entry.
	e.i(s.nextDue)
	e.u(uint64(s.nextNode))
	e.u(uint64(s.nextNetwork))
	mgrs := sortedKeys(s.managers)
	e.u(uint64(len(mgrs)))
	for _, id := range mgrs {
		e.u(id)
		e.str(s.managers[id])
	}
	removed := sortedKeys(s.removedNodes)
	e.u(uint64(len(removed)))
	for _, id := range removed {
		e.u(uint64(id))
	}
	nodes := s.NodeIDs()
	e.u(uint64(len(nodes)))
	for _, id := range nodes {
		encodeNodeSpec(e, s.nodes[id])
	}
	nets := sortedKeys(s.networks)
	e.u(uint64(len(nets)))
	for _, id := range nets {
		encodeNetwork(e, s.networks[id])
		var raw []byte
		var err error
		if pc.encode != nil {
			raw, err = pc.encode(s.pools[id], !s.poolsOwned[id])
		} else {
			raw, err = s.pools[id].MarshalBinary()
		}
		if err != nil {
			return err
		}
		e.str(string(raw))
	}
	svcs := s.ServiceIDs()
	e.u(uint64(len(svcs)))
	for _, id := range svcs {
		svc := s.services[id]
		e.u(uint64(svc.ID))
		encodeSpec(e, &svc.Spec)
		e.u(uint64(svc.SpecVersion))
		e.bool(svc.Remove)
		e.u(svc.ModifyIndex)
		e.bool(svc.PrevSpec != nil)
		if svc.PrevSpec != nil {
			encodeSpec(e, svc.PrevSpec)
		}
		e.byte1(uint8(svc.Update.State))
		e.i(svc.Update.StartedAt)
		e.i(svc.Update.CompletedAt)
		e.str(svc.Update.Message)
		e.u(uint64(svc.Update.Failures))
		slots := sortedKeys(svc.restarts)
		e.u(uint64(len(slots)))
		for _, n := range slots {
			rec := svc.restarts[n]
			e.u(uint64(n))
			e.u(uint64(rec.SpecVersion))
			e.u(uint64(len(rec.Times)))
			for _, at := range rec.Times {
				e.i(at)
			}
		}
	}
	e.u(uint64(s.tasks.len()))
	return nil
}

// encodeTail encodes everything after the tasks.
func (s *State) encodeTail(e *encoder) {
	s.encodeRedrive(e)
	s.encodeJoinKeys(e)
	s.encodeRequests(e)
}

func encodeTask(e *encoder, t *Task) {
	e.u(uint64(t.ID))
	e.u(uint64(t.Service))
	e.u(uint64(t.Slot))
	e.u(uint64(t.SpecVersion))
	e.u(uint64(t.Node))
	e.byte1(uint8(t.Desired))
	e.byte1(uint8(t.Status.State))
	e.i(int64(t.Status.ExitCode))
	e.str(t.Message())
	e.i(t.Status.Timestamp)
	e.byte1(uint8(t.History.Len()))
	for i := 0; i < t.History.Len(); i++ {
		h := t.History.At(i)
		e.i(h.At)
		e.byte1(uint8(h.State))
		e.byte1(uint8(h.Kind))
		e.byte1(uint8(h.By))
		e.byte1(uint8(h.Desired))
	}
	e.i(t.StartAt())
	e.i(t.StartBy())
	e.bool(t.AfterReject())
	e.byte1(uint8(t.StopReason))
	e.u(uint64(len(t.Attachments)))
	for _, a := range t.Attachments {
		e.u(uint64(a.Network))
		e.u(uint64(a.Addr))
		e.bool(a.Released)
	}
}

func decodeTask(d *decoder, t *Task) {
	t.ID = TaskID(d.u())
	t.Service = ServiceID(d.un(1<<32-1, "service id"))
	t.Slot = uint32(d.un(1<<32-1, "slot"))
	t.SpecVersion = uint32(d.un(1<<32-1, "spec version"))
	t.Node = NodeID(d.un(1<<32-1, "node id"))
	t.Desired = DesiredState(d.un(uint64(numDesiredStates)-1, "desired state"))
	t.Status.State = TaskState(d.un(uint64(numTaskStates)-1, "task state"))
	t.Status.ExitCode = int32(d.i())
	t.setMessage(d.str(), nil)
	t.Status.Timestamp = d.i()
	n := int(d.un(historyCap, "history length"))
	for range n {
		var h HistoryEntry
		h.At = d.i()
		h.State = TaskState(d.un(uint64(numTaskStates)-1, "history state"))
		h.Kind = HistoryKind(d.un(uint64(HistLost), "history kind"))
		h.By = Component(d.un(uint64(numComponents)-1, "component"))
		h.Desired = DesiredState(d.un(uint64(numDesiredStates)-1, "desired state"))
		t.History.add(h)
	}
	startAt, startBy := d.i(), d.i()
	t.setHold(startAt, startBy, d.bool())
	t.StopReason = StopReason(d.un(uint64(numStopReasons)-1, "stop reason"))
	if k := d.count(2); k > 0 {
		t.Attachments = make([]Attachment, k)
		for i := range t.Attachments {
			t.Attachments[i].Network = NetworkID(d.un(1<<32-1, "network id"))
			t.Attachments[i].Addr = uint32(d.un(1<<32-1, "address"))
			t.Attachments[i].Released = d.bool()
		}
	}
	t.nodePos = -1
}

// maxSnapshot bounds a decompressed snapshot (a state of millions of tasks
// stays far below it); a larger one is refused as corrupt.
const maxSnapshot = 8 << 30

// Load replaces the state with one written by Save. On error the state is
// unchanged.
func (s *State) Load(r io.Reader) error {
	zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxSnapshot))
	if err != nil {
		return fmt.Errorf("statemachine: load: %w", err)
	}
	defer zr.Close()
	raw, err := io.ReadAll(zr)
	if err != nil {
		return fmt.Errorf("%w: load: %w", ErrCorrupt, err)
	}
	ns, err := decodeCanonical(raw)
	if err != nil {
		return fmt.Errorf("statemachine: load: %w", err)
	}
	*s = *ns
	return nil
}

// FromCanonical builds a state from Canonical's output.
func FromCanonical(b []byte) (*State, error) { return decodeCanonical(b) }

func decodeCanonical(b []byte) (*State, error) { return decodeCanonicalWith(b, poolCodec{}) }

func decodeCanonicalWith(b []byte, pc poolCodec) (*State, error) {
	v1 := bytes.HasPrefix(b, []byte(snapshotMagicV1))
	v2 := bytes.HasPrefix(b, []byte(snapshotMagicV2))
	v3 := bytes.HasPrefix(b, []byte(snapshotMagicV3))
	v4 := bytes.HasPrefix(b, []byte(snapshotMagicV4))
	v5 := bytes.HasPrefix(b, []byte(snapshotMagicV5))
	v6 := bytes.HasPrefix(b, []byte(snapshotMagicV6))
	cur := bytes.HasPrefix(b, []byte(snapshotMagic))
	if !v1 && !v2 && !v3 && !v4 && !v5 && !v6 && !cur {
		return nil, fmt.Errorf("%w: not a Shoal state snapshot (bad magic)", ErrCorrupt)
	}
	d := newDecoder(b)
	d.specExt = cur
	d.Take(uint64(len(snapshotMagic)), "magic")
	var cfg Config
	cfg.Group = uint16(d.un(1<<16-1, "group"))
	cfg.Groups = int(d.un(1<<16, "groups"))
	cfg.HistoryRetention = int(d.un(1<<16, "task history limit")) // New makes it the settings' (0: the default)
	cfg.ManualReactions = d.bool()
	s := New(cfg)
	s.lastIndex = d.u()
	if !v1 {
		s.lastTime = d.i()
	}
	s.nextTask = d.u()
	s.nextService = ServiceID(d.un(1<<32-1, "next service"))
	s.nextDue = d.i()
	s.nextNode = NodeID(d.un(1<<32-1, "next node"))
	s.nextNetwork = NetworkID(d.un(1<<32-1, "next network"))
	for range d.count(2) {
		id := d.u()
		s.managers[id] = d.str()
	}
	for range d.count(1) {
		s.removedNodes[NodeID(d.un(1<<32-1, "node id"))] = struct{}{}
	}
	for range d.count(8) {
		n := new(Node)
		decodeNodeSpec(&d, n)
		if n.Labels != nil {
			n.Labels = s.labelSet(n.Labels)
		}
		if d.Err() == nil && (n.ID == 0 || s.nodes[n.ID] != nil) {
			d.fail(fmt.Sprintf("node id %d zero or repeated", n.ID))
		}
		s.nodes[n.ID] = n
	}
	for range d.count(3) {
		nw := new(Network)
		decodeNetwork(&d, nw)
		if d.Err() == nil && (nw.ID == 0 || s.networks[nw.ID] != nil || s.networkNames[nw.Name] != 0) {
			d.fail(fmt.Sprintf("network id %d or name %q zero or repeated", nw.ID, nw.Name))
		}
		s.networks[nw.ID] = nw
		s.networkNames[nw.Name] = nw.ID
		raw := d.str()
		if d.Err() == nil && pc.decode != nil {
			p, shared, err := pc.decode(raw)
			if err != nil {
				d.fail(fmt.Sprintf("network %d pool: %v", nw.ID, err))
			} else if shared {
				s.pools[nw.ID] = p // copied before a change (poolW)
			} else {
				s.setPool(nw.ID, p)
			}
		} else if d.Err() == nil {
			p := new(ipam.Pool)
			if err := p.UnmarshalBinary([]byte(raw)); err != nil {
				d.fail(fmt.Sprintf("network %d pool: %v", nw.ID, err))
			}
			s.setPool(nw.ID, p)
		}
	}
	for range d.count(8) {
		svc := &Service{}
		svc.ID = ServiceID(d.un(1<<32-1, "service id"))
		decodeSpec(&d, &svc.Spec)
		svc.SpecVersion = uint32(d.un(1<<32-1, "spec version"))
		svc.Remove = d.bool()
		svc.ModifyIndex = d.u()
		if d.bool() {
			svc.PrevSpec = new(ServiceSpec)
			decodeSpec(&d, svc.PrevSpec)
		}
		svc.Update.State = UpdateState(d.un(uint64(numUpdateStates)-1, "update state"))
		svc.Update.StartedAt = d.i()
		svc.Update.CompletedAt = d.i()
		svc.Update.Message = d.str()
		svc.Update.Failures = uint32(d.un(1<<32-1, "failures"))
		if svc.Update.active() {
			s.updating[svc.ID] = svc
		}
		for range d.count(3) {
			if svc.restarts == nil {
				svc.restarts = make(map[uint32]*restartRecord)
			}
			n := uint32(d.un(1<<32-1, "slot"))
			rec := &restartRecord{SpecVersion: uint32(d.un(1<<32-1, "spec version"))}
			for range d.count(1) {
				rec.Times = append(rec.Times, d.i())
			}
			svc.restarts[n] = rec
		}
		if d.Err() == nil && (svc.ID == 0 || s.services[svc.ID] != nil || s.serviceByName[svc.Spec.Name] != 0) {
			d.fail(fmt.Sprintf("service %d %q zero or repeated", svc.ID, svc.Spec.Name))
		}
		s.services[svc.ID] = svc
		s.serviceByName[svc.Spec.Name] = svc.ID
	}
	var prev TaskID
	nt := d.count(16)
	s.tasks = newTaskTable()
	var scratch Task
	for range nt {
		scratch = Task{}
		decodeTask(&d, &scratch)
		if d.Err() != nil {
			break
		}
		t := allocTask(len(scratch.Attachments), &scratch) // a task on one network with its room
		svc := s.services[t.Service]
		if svc == nil || t.ID <= prev {
			d.fail(fmt.Sprintf("task %d: unknown service %d or IDs out of order", t.ID, t.Service))
			break
		}
		prev = t.ID
		s.tasks.set(t)
		if t.Status.State == StateNew {
			s.addWaiting(t) // in ID order: tasks are decoded by increasing ID
		}
		if delayedFacts(t, nil) {
			s.delayed[t.ID] = t
			s.delayedDue.push(t.StartAt(), t.ID)
		}
		if heldAsideFacts(t, s.nodes[t.Node]) {
			s.unknown[t.ID] = t
			s.unknownDue.push(lostAt(t, svc), t.ID)
		}
		sl := svc.slots.get(t.Slot)
		if sl == nil {
			sl = newSlot()
			svc.slots.set(t.Slot, sl)
			svc.slotOrder = nil
		}
		sl.add(t)
		s.countTask(t, 1)
		if !t.Desired.Stopping() {
			s.countLive(t, 1)
		}
		if n := s.nodes[t.Node]; n != nil {
			s.attach(t, n)
		}
	}
	if !v1 && !v2 && d.Err() == nil {
		s.decodeRedrive(&d, v3)
		if !v3 && !v4 {
			s.decodeJoinKeys(&d)
		}
		if !v3 && !v4 && !v5 {
			s.decodeRequests(&d)
		}
	} else if d.Err() == nil {
		s.leaseLegacyStripes()
	}
	if d.Err() == nil && d.Len() != 0 {
		d.fail("trailing bytes")
	}
	if d.Err() != nil {
		return nil, d.Err()
	}
	s.relistQuarantine()
	for _, n := range s.nodes {
		slices.SortFunc(n.tasks, func(a, b *Task) int { return cmp.Compare(a.ID, b.ID) })
		for i, t := range n.tasks {
			t.nodePos = int32(i)
		}
	}
	return s, nil
}
