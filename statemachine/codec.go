package statemachine

import (
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
)

// batchVersion is the first byte of every encoded batch; a replica that
// meets a version it does not know rejects the entry instead of guessing.
// Version 2 added the service spec's labels and rollback configuration;
// version 1 entries still decode (decodeSpec).
const (
	batchVersion   = 2
	batchVersionV1 = 1
)

// AppendBatch appends the encoding of a batch of commands to dst.
func AppendBatch(dst []byte, batch []Command) []byte {
	e := encoder{b: dst}
	e.byte1(batchVersion)
	e.u(uint64(len(batch)))
	for i := range batch {
		encodeCommand(&e, &batch[i])
	}
	return e.b
}

// AppendBatchHeader appends the head of a batch of n commands to dst:
// followed by n encodings from AppendChecked, it is what AppendBatch
// writes for those commands.
func AppendBatchHeader(dst []byte, n int) []byte {
	e := encoder{b: dst}
	e.byte1(batchVersion)
	e.u(uint64(n))
	return e.b
}

// DecodeBatch decodes a batch written by AppendBatch. Corrupt input yields an
// error wrapping ErrCorrupt, never a panic.
func DecodeBatch(b []byte) ([]Command, error) { return DecodeBatchInto(nil, b) }

// DecodeBatchInto is DecodeBatch into buf's array when it has room (each
// command is zeroed first; the caller must be done with buf's old
// commands); a replica decodes every entry into one buffer instead of
// allocating a batch per entry.
func DecodeBatchInto(buf []Command, b []byte) ([]Command, error) {
	d := newDecoder(b)
	v := d.byte1()
	if d.Err() == nil && v > batchVersion && v <= batchVersion+NewerFormats {
		return nil, fmt.Errorf("%w: batch version %d, this build knows %d", ErrNewerFormat, v, batchVersion)
	}
	if d.Err() == nil && v != batchVersion && v != batchVersionV1 {
		return nil, fmt.Errorf("%w: batch version %d, this build knows %d", ErrCorrupt, v, batchVersion)
	}
	d.specExt = v == batchVersion
	n := d.count(1)
	var batch []Command
	if cap(buf) >= n {
		batch = buf[:n]
		clear(batch)
	} else {
		batch = make([]Command, n)
	}
	for i := range batch {
		decodeCommand(&d, &batch[i])
	}
	if d.Err() == nil && d.Len() != 0 {
		d.fail("trailing bytes")
	}
	if d.Err() != nil {
		clear(batch) // buf may be a pooled array: keep nothing decoded from bad bytes
		return nil, d.Err()
	}
	return batch, nil
}

func encodeCommand(e *encoder, c *Command) {
	e.byte1(uint8(c.Kind))
	e.byte1(uint8(c.State))
	e.byte1(uint8(c.NodeStatus))
	e.byte1(uint8(c.Availability))
	e.i(int64(c.ExitCode))
	e.u(uint64(c.Node))
	e.u(uint64(c.Task))
	e.u(c.Seq)
	e.u(uint64(len(c.Tasks)))
	for _, id := range c.Tasks {
		e.u(uint64(id))
	}
	e.str(c.Name)
	e.str(c.Message)
	var flags uint8
	if c.Spec != nil {
		flags |= 1
	}
	if c.NodeSpec != nil {
		flags |= 2
	}
	if c.NetworkSpec != nil {
		flags |= 4
	}
	lease := c.Group != 0 || c.Count != 0 || c.Network != 0 || len(c.Blocks) > 0 || c.Entry != nil
	if lease {
		flags |= 8
	}
	if c.RequestID != "" {
		flags |= 16
	}
	if c.Settings != nil {
		flags |= 32
	}
	e.byte1(flags)
	if c.Spec != nil {
		encodeSpec(e, c.Spec)
	}
	if c.NodeSpec != nil {
		encodeNodeSpec(e, c.NodeSpec)
	}
	if c.NetworkSpec != nil {
		encodeNetwork(e, c.NetworkSpec)
	}
	if lease {
		encodeLeaseFields(e, c)
	}
	if c.RequestID != "" {
		e.str(c.RequestID)
	}
	if c.Settings != nil {
		encodeSettings(e, c.Settings)
	}
}

// encodeSettings writes the cluster settings (flag 32), absent from
// batches written before them.
func encodeSettings(e *encoder, cs *ClusterSettings) {
	e.u(uint64(cs.TaskHistoryLimit))
}

func decodeSettings(d *decoder, cs *ClusterSettings) {
	cs.TaskHistoryLimit = int(d.un(1<<16, "task history limit"))
}

// encodeLeaseFields writes the re-drive fields (flag 8), absent from
// batches written before them.
func encodeLeaseFields(e *encoder, c *Command) {
	e.u(uint64(c.Group))
	e.u(uint64(c.Count))
	e.u(uint64(c.Network))
	e.u(uint64(len(c.Blocks)))
	for _, b := range c.Blocks {
		e.u(uint64(b))
	}
	e.bool(c.Entry != nil)
	if c.Entry != nil {
		if c.Entry.Cmd.Entry != nil {
			panic("statemachine: an outbox entry cannot nest another") // AppendChecked refuses it first
		}
		e.u(c.Entry.Seq)
		e.u(c.Entry.Index)
		encodeCommand(e, &c.Entry.Cmd)
	}
}

func decodeLeaseFields(d *decoder, c *Command, nested bool) {
	c.Group = uint16(d.un(1<<16-1, "group"))
	c.Count = uint32(d.un(1<<32-1, "count"))
	c.Network = NetworkID(d.un(1<<32-1, "network id"))
	if n := d.count(1); n > 0 {
		c.Blocks = make([]uint32, n)
		for i := range c.Blocks {
			c.Blocks[i] = uint32(d.un(1<<32-1, "block"))
		}
	}
	if d.bool() {
		if nested {
			d.fail("nested outbox entry")
			return
		}
		c.Entry = &OutboxEntry{Seq: d.u(), Index: d.u()}
		decodeCommandNested(d, &c.Entry.Cmd, true)
	}
}

func decodeCommand(d *decoder, c *Command) { decodeCommandNested(d, c, false) }

func decodeCommandNested(d *decoder, c *Command, nested bool) {
	c.Kind = CmdKind(d.un(uint64(numCmdKinds)-1, "command kind"))
	c.State = TaskState(d.un(uint64(numTaskStates)-1, "task state"))
	c.NodeStatus = NodeStatus(d.un(uint64(numNodeStatuses)-1, "node status"))
	c.Availability = Availability(d.un(uint64(numAvailabilities)-1, "availability"))
	c.ExitCode = int32(d.i())
	c.Node = NodeID(d.un(1<<32-1, "node id"))
	c.Task = TaskID(d.u())
	c.Seq = d.u()
	if n := d.count(1); n > 0 {
		c.Tasks = make([]TaskID, n)
		for i := range c.Tasks {
			c.Tasks[i] = TaskID(d.u())
		}
	}
	c.Name = d.str()
	c.Message = d.str()
	flags := d.byte1()
	if flags&^63 != 0 {
		d.fail("bad command flags")
		return
	}
	if flags&1 != 0 {
		c.Spec = new(ServiceSpec)
		decodeSpec(d, c.Spec)
	}
	if flags&2 != 0 {
		c.NodeSpec = new(Node)
		decodeNodeSpec(d, c.NodeSpec)
	}
	if flags&4 != 0 {
		c.NetworkSpec = new(Network)
		decodeNetwork(d, c.NetworkSpec)
	}
	if flags&8 != 0 {
		decodeLeaseFields(d, c, nested)
	}
	if flags&16 != 0 {
		c.RequestID = d.str()
	}
	if flags&32 != 0 {
		c.Settings = new(ClusterSettings)
		decodeSettings(d, c.Settings)
	}
}

func encodeStrings(e *encoder, ss []string) {
	e.u(uint64(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}

func decodeStrings(d *decoder) []string {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = d.str()
	}
	return ss
}

func encodeSpec(e *encoder, s *ServiceSpec) {
	e.str(s.Name)
	e.byte1(uint8(s.Mode))
	e.u(uint64(s.Replicas))
	e.str(s.Image)
	e.byte1(uint8(s.Restart.Condition))
	e.i(s.Restart.Delay)
	e.u(uint64(s.Restart.MaxAttempts))
	e.i(s.Restart.Window)
	encodeStrings(e, s.Constraints)
	encodeStrings(e, s.Networks)
	e.i(s.CPU)
	e.i(s.Memory)
	e.i(s.Disconnect.LostAfter)
	e.bool(s.Disconnect.NoReplace)
	e.byte1(uint8(s.Disconnect.Reconcile))
	encodeUpdateConfig(e, &s.Update)
	encodeStrings(e, s.Command)
	encodeStrings(e, s.Env)
	e.str(s.Dir)
	e.i(s.StopGrace)
	encodeStrings(e, s.Placement.Preferences)
	e.u(uint64(s.Placement.MaxPerNode))
	e.byte1(uint8(s.Placement.Strategy))
	encodeSpecExt(e, s)
}

// encodeSpecExt writes the fields added in batch version 2 and snapshot
// format 7: the labels and the rollback configuration.
func encodeSpecExt(e *encoder, s *ServiceSpec) {
	keys := slices.Sorted(maps.Keys(s.Labels))
	e.u(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.str(s.Labels[k])
	}
	encodeUpdateConfig(e, &s.Rollback)
}

func encodeUpdateConfig(e *encoder, u *UpdateConfig) {
	e.u(uint64(u.Parallelism))
	e.i(u.Delay)
	e.byte1(uint8(u.FailureAction))
	e.i(u.Monitor)
	e.u(math.Float64bits(u.MaxFailureRatio))
	e.byte1(uint8(u.Order))
}

func decodeUpdateConfig(d *decoder, u *UpdateConfig) {
	u.Parallelism = uint32(d.un(1<<32-1, "parallelism"))
	u.Delay = d.i()
	u.FailureAction = FailureAction(d.un(uint64(numFailureActions)-1, "failure action"))
	u.Monitor = d.i()
	u.MaxFailureRatio = math.Float64frombits(d.u())
	u.Order = UpdateOrder(d.un(uint64(StartFirst), "update order"))
}

func decodeSpec(d *decoder, s *ServiceSpec) {
	s.Name = d.str()
	s.Mode = ServiceMode(d.un(uint64(ModeGlobal), "service mode"))
	s.Replicas = uint32(d.un(1<<32-1, "replicas"))
	s.Image = d.str()
	s.Restart.Condition = RestartCondition(d.un(uint64(RestartNone), "restart condition"))
	s.Restart.Delay = d.i()
	s.Restart.MaxAttempts = uint32(d.un(1<<32-1, "max attempts"))
	s.Restart.Window = d.i()
	s.Constraints = decodeStrings(d)
	s.Networks = decodeStrings(d)
	s.CPU = d.i()
	s.Memory = d.i()
	s.Disconnect.LostAfter = d.i()
	s.Disconnect.NoReplace = d.bool()
	s.Disconnect.Reconcile = ReconcileMode(d.un(uint64(numReconcileModes)-1, "reconcile mode"))
	decodeUpdateConfig(d, &s.Update)
	s.Command = decodeStrings(d)
	s.Env = decodeStrings(d)
	s.Dir = d.str()
	s.StopGrace = d.i()
	s.Placement.Preferences = decodeStrings(d)
	s.Placement.MaxPerNode = uint32(d.un(1<<32-1, "max replicas per node"))
	s.Placement.Strategy = PlacementStrategy(d.un(uint64(numStrategies)-1, "placement strategy"))
	if !d.specExt {
		// Written before labels and rollback configurations: a rollback
		// moved by the update configuration and paused on failure.
		s.Rollback = s.Update
		if s.Rollback.FailureAction == ActionRollback {
			s.Rollback.FailureAction = ActionPause
		}
		return
	}
	if k := d.count(2); k > 0 {
		s.Labels = make(map[string]string, k)
		for range k {
			key := d.str()
			s.Labels[key] = d.str()
		}
	}
	decodeUpdateConfig(d, &s.Rollback)
}

// encodeNodeSpec writes a node's declared fields and status (not its task
// list, which is an index rebuilt from tasks).
func encodeNodeSpec(e *encoder, n *Node) {
	e.u(uint64(n.ID))
	e.str(n.Name)
	e.str(n.Role.String()) // a string, as before roles were typed
	keys := slices.Sorted(maps.Keys(n.Labels))
	e.u(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.str(n.Labels[k])
	}
	e.i(n.CPU)
	e.i(n.Memory)
	e.byte1(uint8(n.Availability))
	e.byte1(uint8(n.Status))
	e.i(n.StatusAt)
	e.u(n.AssignSeq)
}

func decodeNodeSpec(d *decoder, n *Node) {
	n.ID = NodeID(d.un(1<<32-1, "node id"))
	n.Name = d.str()
	role, err := ParseRole(d.str())
	if err != nil {
		d.fail(err.Error())
	}
	n.Role = role
	if k := d.count(2); k > 0 {
		n.Labels = make(map[string]string, k)
		for range k {
			key := d.str()
			n.Labels[key] = d.str()
		}
	}
	n.CPU = d.i()
	n.Memory = d.i()
	n.Availability = Availability(d.un(uint64(numAvailabilities)-1, "availability"))
	n.Status = NodeStatus(d.un(uint64(numNodeStatuses)-1, "node status"))
	n.StatusAt = d.i()
	n.AssignSeq = d.u()
}

func encodeNetwork(e *encoder, n *Network) {
	e.u(uint64(n.ID))
	e.str(n.Name)
	e.str(n.Subnet)
	encodeStrings(e, n.Reserved)
}

func decodeNetwork(d *decoder, n *Network) {
	n.ID = NetworkID(d.un(1<<32-1, "network id"))
	n.Name = d.str()
	n.Subnet = d.str()
	n.Reserved = decodeStrings(d)
}

// AppendResults appends the encoding of a batch's results to dst.
//
// dst grows once, to exactly what the results take (an entry's results
// are kept by Raft's client sessions, so every replica allocates them
// anew: 4+4n bytes for 3n+2 was a quarter more than needed).
func AppendResults(dst []byte, rs []Result) []byte {
	size := uvarintLen(uint64(len(rs)))
	for _, r := range rs {
		size += 1 + uvarintLen(r.ID) + uvarintLen(uint64(len(r.Msg))) + len(r.Msg)
	}
	e := encoder{b: slices.Grow(dst, size)}
	e.u(uint64(len(rs)))
	for _, r := range rs {
		e.byte1(uint8(r.Code))
		e.u(r.ID)
		e.str(r.Msg)
	}
	return e.b
}

// DecodeResults decodes what AppendResults wrote.
func DecodeResults(b []byte) ([]Result, error) { return DecodeResultsInto(nil, b) }

// DecodeResultsInto is DecodeResults into buf's array when it has room.
func DecodeResultsInto(buf []Result, b []byte) ([]Result, error) {
	d := newDecoder(b)
	n := d.count(3)
	var rs []Result
	if cap(buf) >= n {
		rs = buf[:n]
	} else {
		rs = make([]Result, n)
	}
	for i := range rs {
		rs[i].Code = Code(d.un(uint64(numCodes)-1, "result code"))
		rs[i].ID = d.u()
		rs[i].Msg = d.str()
	}
	if d.Err() != nil {
		return nil, d.Err()
	}
	return rs, nil
}

// CheckEncodable rejects (CodeInvalid) a command that would not survive
// the batch codec, before it joins a batch: one such command would make
// the whole entry, everyone else's commands included, undecodable on the
// replicas. See AppendChecked.
func CheckEncodable(c *Command) Result {
	_, r := AppendChecked(nil, c)
	return r
}

// AppendChecked is CheckEncodable that appends the encoding it checked to
// dst (after AppendBatchHeader, as AppendBatch writes it), so that a
// command is encoded once on its way to Raft and never decoded to be
// checked: its fields are checked against what decodeCommand accepts
// (unencodable). A command refused leaves dst as it was.
func AppendChecked(dst []byte, c *Command) ([]byte, Result) {
	if why := unencodable(c, false); why != "" {
		return dst, Result{Code: CodeInvalid, Msg: "command cannot be encoded: " + why}
	}
	e := encoder{b: dst}
	encodeCommand(&e, c)
	return e.b, Result{}
}

// unencodable says why decodeCommand would refuse c's encoding, "" when it
// would not: the bounds it checks, field by field (every other field
// decodes whatever it holds). TestUnencodableIsTheRoundTrip holds the two
// together.
func unencodable(c *Command, nested bool) string {
	switch {
	case c.Kind >= numCmdKinds:
		return fmt.Sprintf("command kind %d out of range", c.Kind)
	case !c.State.Valid():
		return fmt.Sprintf("task state %d out of range", c.State)
	case c.NodeStatus >= numNodeStatuses:
		return fmt.Sprintf("node status %d out of range", c.NodeStatus)
	case c.Availability >= numAvailabilities:
		return fmt.Sprintf("availability %d out of range", c.Availability)
	case c.Settings != nil && uint64(c.Settings.TaskHistoryLimit) > 1<<16:
		return fmt.Sprintf("task history limit %d out of range", c.Settings.TaskHistoryLimit)
	}
	if s := c.Spec; s != nil {
		switch {
		case s.Mode > ModeGlobal:
			return fmt.Sprintf("service mode %d out of range", s.Mode)
		case s.Restart.Condition > RestartNone:
			return fmt.Sprintf("restart condition %d out of range", s.Restart.Condition)
		case s.Disconnect.Reconcile >= numReconcileModes:
			return fmt.Sprintf("reconcile mode %d out of range", s.Disconnect.Reconcile)
		case s.Placement.Strategy >= numStrategies:
			return fmt.Sprintf("placement strategy %d out of range", s.Placement.Strategy)
		}
		for _, u := range []*UpdateConfig{&s.Update, &s.Rollback} {
			switch {
			case u.FailureAction >= numFailureActions:
				return fmt.Sprintf("failure action %d out of range", u.FailureAction)
			case u.Order > StartFirst:
				return fmt.Sprintf("update order %d out of range", u.Order)
			}
		}
	}
	if n := c.NodeSpec; n != nil {
		switch {
		case n.Role >= numRoles:
			return fmt.Sprintf("node role %d out of range", n.Role)
		case n.Availability >= numAvailabilities:
			return fmt.Sprintf("node availability %d out of range", n.Availability)
		case n.Status >= numNodeStatuses:
			return fmt.Sprintf("node status %d out of range", n.Status)
		}
	}
	if c.Entry != nil {
		if nested {
			return "an outbox entry cannot carry another"
		}
		return unencodable(&c.Entry.Cmd, true)
	}
	return ""
}

// uvarintLen is the length of v's uvarint encoding.
func uvarintLen(v uint64) int {
	return (bits.Len64(v|1) + 6) / 7
}
