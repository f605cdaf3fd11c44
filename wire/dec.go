package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"shoal/internal/varint"
	"shoal/statemachine"
)

// reader decodes a payload or one nested element of it, reading bytes
// with internal/varint's bounded Reader. Its first error sticks and the
// caller checks err once at the end; reads after it may go on but never
// allocate more than the bytes left justify. A read past the end returns
// zero without error (a field an older sender did not write); a value cut
// short inside is malformed.
type reader struct {
	v    varint.Reader // the message or the element being read
	err  error
	what string // the message being decoded, for errors
	// seen caches decoded strings by a hash of their bytes, so a name
	// repeated across the elements of a frame (a service, a network, an exit
	// message) is usually allocated once.
	seen [1 << seenBits]string
}

// gatherer collects the strings of an Assignments frame, which become
// substrings of one string when the frame is read (flush), so a frame's
// strings cost one allocation. Its buffers are arrays, not slices of
// itself, so a gatherer stays on its caller's stack.
type gatherer struct {
	buf  [1024]byte
	n    int    // bytes in buf while big is nil
	big  []byte // the bytes, once over len(buf)
	pend [96]pendingString
	np   int
	more []pendingString // past len(pend)
	end  int             // the payload's length, to size big and more
	// kept finds an earlier copy of a repeated string of the frame.
	kept [1 << seenBits]span
}

// span is the gathered bytes [from, to).
type span struct{ from, to int32 }

// pendingString is a decoded string waiting for flush to be stored in dst.
type pendingString struct {
	dst *string
	span
}

func (g *gatherer) text() []byte {
	if g.big != nil {
		return g.big
	}
	return g.buf[:g.n]
}

func (g *gatherer) add(r *reader, p pendingString) {
	if g.np < len(g.pend) {
		g.pend[g.np] = p
		g.np++
		return
	}
	if g.more == nil {
		// A string takes at least two bytes of the frame.
		g.more = make([]pendingString, 0, 1+min(g.rest(r, g.np), (g.end-r.v.Off())/2))
	}
	g.more = append(g.more, p)
}

// rest estimates how many more of what the frame read so far holds had
// (bytes, strings) its unread bytes hold, at the same rate; at most the
// unread bytes.
func (g *gatherer) rest(r *reader, had int) int {
	read, left := r.v.Off(), g.end-r.v.Off()
	if read <= 0 || left <= 0 {
		return 0
	}
	return min(left, had*left/read+16)
}

// gather decodes a string into *dst, through flush; with cached, a repeat
// of an earlier string of the frame shares its bytes.
func (g *gatherer) gather(r *reader, dst *string, field string, cached bool) {
	*dst = ""
	b := r.bytes(field)
	if len(b) == 0 {
		return
	}
	var k *span
	if cached {
		k = &g.kept[stringSlot(b)]
		if k.to > k.from && string(g.text()[k.from:k.to]) == string(b) {
			g.add(r, pendingString{dst, *k})
			return
		}
	}
	if !utf8.Valid(b) {
		r.fail("%s is not UTF-8 text", field)
		return
	}
	from := len(g.text())
	switch {
	case g.big == nil && g.n+len(b) <= len(g.buf):
		g.n += copy(g.buf[g.n:], b)
	case g.big == nil:
		// Room for what the frame's rest likely holds at the rate so far.
		g.big = append(append(make([]byte, 0, g.n+len(b)+g.rest(r, g.n)), g.buf[:g.n]...), b...)
	default:
		g.big = append(g.big, b...)
	}
	sp := span{int32(from), int32(from + len(b))}
	g.add(r, pendingString{dst, sp})
	if k != nil {
		*k = sp
	}
}

// strings decodes a string list like reader.strings, through gather.
func (g *gatherer) strings(r *reader, dst []string, field string) []string {
	n := r.count(1, field)
	if n == 0 {
		return nil
	}
	dst = slices.Grow(dst[:0], n)[:n]
	for i := range dst {
		r.more(field)
		g.gather(r, &dst[i], field, true)
	}
	return dst
}

// flush stores every gathered string, all sharing one allocation.
func (g *gatherer) flush() {
	if g.np == 0 {
		return
	}
	all := string(g.text())
	for _, p := range g.pend[:g.np] {
		*p.dst = all[p.from:p.to]
	}
	for _, p := range g.more {
		*p.dst = all[p.from:p.to]
	}
}

func (r *reader) fail(format string, args ...any) {
	r.numbers()
	if r.err == nil {
		r.err = errorf(ErrMalformed, "%s: %s", r.what, fmt.Sprintf(format, args...))
	}
}

// numbers takes over the byte reader's error, if it has one first: the
// length and count checks here come before its reads, so its only
// failures are numbers it could not read.
func (r *reader) numbers() {
	if r.err == nil && r.v.Err() != nil {
		r.err = errorf(ErrMalformed, "%s: a number is cut short or longer than 64 bits", r.what)
	}
}

// uvarint reads a number; past the end it is zero (a field an older
// sender did not write).
func (r *reader) uvarint() uint64 {
	if r.v.Len() == 0 {
		return 0
	}
	return r.v.Uvarint("number")
}

func (r *reader) varint() int64 {
	if r.v.Len() == 0 {
		return 0
	}
	return r.v.Varint("number")
}

// more fails unless bytes are left for the next element of a list: a list
// may not run past the end of its message or element.
func (r *reader) more(field string) {
	if r.v.Len() == 0 {
		r.fail("%s: the list is cut short", field)
	}
}

// bounded reads a uvarint that must be at most limit.
func (r *reader) bounded(limit uint64, field string) uint64 {
	v := r.uvarint()
	if v > limit {
		r.fail("%s %d is over its limit %d", field, v, limit)
		return 0
	}
	return v
}

// enum reads an enum value that must have one of names.
func (r *reader) enum(names []string, field string) uint8 {
	v := r.uvarint()
	if v >= uint64(len(names)) || names[v] == "" {
		r.fail("%s %d is unknown to this Shoal (it knows %s)", field, v, strings.Join(nonEmpty(names), ", "))
		return 0
	}
	return uint8(v)
}

func (r *reader) u32(field string) uint32 { return uint32(r.bounded(math.MaxUint32, field)) }

func (r *reader) i32(field string) int32 {
	v := r.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail("%s %d does not fit in 32 bits", field, v)
		return 0
	}
	return int32(v)
}

func (r *reader) nodeID() statemachine.NodeID { return statemachine.NodeID(r.u32("node id")) }

func (r *reader) bool(field string) bool { return r.bounded(1, field) == 1 }

// count reads a list length and checks that that many elements of at least
// minSize bytes each fit in what is left, so no input makes a decoder
// allocate more than a small multiple of its own size.
func (r *reader) count(minSize int, field string) int {
	n := r.uvarint()
	if n > uint64(r.v.Len()/minSize) {
		r.fail("%s: %d entries cannot fit in the %d bytes left", field, n, r.v.Len())
		return 0
	}
	return int(n)
}

func (r *reader) bytes(field string) []byte {
	n := r.uvarint()
	if n > uint64(r.v.Len()) {
		r.fail("%s: %d bytes do not fit in the %d bytes left", field, n, r.v.Len())
		return nil
	}
	return r.v.Take(n, field)
}

// string decodes a string that is likely unique in its frame (an address).
func (r *reader) string(field string) string {
	b := r.bytes(field)
	if len(b) == 0 {
		return ""
	}
	if !utf8.Valid(b) {
		r.fail("%s is not UTF-8 text", field)
		return ""
	}
	return string(b)
}

// name decodes a string that likely repeats in its frame (a service, a
// network, an exit message): the cache returns an earlier copy.
func (r *reader) name(field string) string {
	b := r.bytes(field)
	if len(b) == 0 {
		return ""
	}
	h := &r.seen[stringSlot(b)]
	if *h == string(b) {
		return *h
	}
	if !utf8.Valid(b) {
		r.fail("%s is not UTF-8 text", field)
		return ""
	}
	*h = string(b)
	return *h
}

// stringSlot picks the cache slot of a non-empty string from its length and
// up to eight bytes at each end.
func stringSlot(b []byte) int {
	var head, tail [8]byte
	copy(head[:], b)
	copy(tail[:], b[max(0, len(b)-8):])
	h := binary.LittleEndian.Uint64(head[:])*0x9e3779b97f4a7c15 ^ binary.LittleEndian.Uint64(tail[:])*0xc2b2ae3d27d4eb4f ^ uint64(len(b))
	return int(h >> (64 - seenBits))
}

// seenBits sizes the string cache of a reader (128 strings, 2 KiB).
const seenBits = 7

// strings decodes a string list into dst's storage; with cached, through
// the cache of repeated strings.
func (r *reader) strings(dst []string, field string, cached bool) []string {
	n := r.count(1, field)
	if n == 0 {
		return nil
	}
	dst = slices.Grow(dst[:0], n)
	for range n {
		r.more(field)
		if cached {
			dst = append(dst, r.name(field))
		} else {
			dst = append(dst, r.string(field))
		}
	}
	return dst
}

func (r *reader) uvarints(dst []uint64, field string) []uint64 {
	n := r.count(1, field)
	if n == 0 {
		return nil
	}
	dst = slices.Grow(dst[:0], n)
	for range n {
		r.more(field)
		dst = append(dst, r.uvarint())
	}
	return dst
}

// sharedUvarints reads a number list like uvarints into dst if it has
// room, else into *shared, which it makes, when needed, with room for this
// list and lists-1 more of its length (no more than the bytes left could
// hold). The list it returns has no spare capacity, so appending to it
// never writes over the next one.
func (r *reader) sharedUvarints(dst []uint64, shared *[]uint64, lists int, field string) []uint64 {
	n := r.count(1, field)
	if n == 0 {
		return nil
	}
	if n <= cap(dst) {
		dst = dst[:0]
	} else {
		if n > cap(*shared)-len(*shared) {
			*shared = make([]uint64, 0, min(n*lists, n+r.v.Len()))
		}
		l := len(*shared)
		dst = (*shared)[l : l : l+n]
		*shared = (*shared)[:l+n]
	}
	for range n {
		r.more(field)
		dst = append(dst, r.uvarint())
	}
	return dst
}

func (r *reader) cursor(dst Cursor, field string) Cursor {
	c := Cursor(r.uvarints(dst, field))
	if len(c) > maxCursorGroups {
		r.fail("%s has %d groups, more than %d", field, len(c), maxCursorGroups)
	}
	return c
}

func (r *reader) taskIDs(dst []statemachine.TaskID, field string) []statemachine.TaskID {
	n := r.count(1, field)
	if n == 0 {
		return nil
	}
	dst = slices.Grow(dst[:0], n)
	for range n {
		r.more(field)
		dst = append(dst, statemachine.TaskID(r.uvarint()))
	}
	return dst
}

// enter makes r read only the next length-prefixed element and returns
// where the enclosing one ends, for leave.
func (r *reader) enter(field string) (outer int) {
	n := r.uvarint()
	if n > uint64(r.v.Len()) {
		r.fail("%s: %d bytes do not fit in the %d bytes left", field, n, r.v.Len())
		n = 0
	}
	return r.v.Limit(n, field)
}

// leave skips what is left of the element (a newer sender's fields) and
// moves r past it.
func (r *reader) leave(outer int) { r.v.Unlimit(outer) }

// decodePayload decodes the payload of a type-t message into m.
func decodePayload(p []byte, m Message) error {
	r := reader{v: varint.NewReader(p, ErrMalformed), what: m.Type().String()}
	switch m := m.(type) {
	case *Error:
		m.Code = r.name("code")
		m.Message = r.name("message")
		m.RetryAfter = r.varint()
		m.Leader = r.string("leader")
	case *SessionRequest:
		m.NodeID = r.nodeID()
		clear(m.Node.Labels)
		labels := m.Node.Labels
		m.Node = NodeDescription{}
		rest := r.enter("node")
		m.Node.Hostname = r.name("hostname")
		m.Node.Labels = r.labels(labels)
		m.Node.CPU = r.varint()
		m.Node.Memory = r.varint()
		m.Node.AgentVersion = r.name("agent version")
		r.leave(rest)
		m.Key = r.string("key")
	case *Session:
		m.NodeID = r.nodeID()
		m.SessionID = r.uvarint()
		m.HeartbeatPeriod = r.varint()
		m.SyncInterval = r.varint()
		m.Managers = r.strings(m.Managers, "managers", false)
		m.Groups = uint16(r.bounded(math.MaxUint16, "groups"))
	case *Heartbeat:
		m.NodeID = r.nodeID()
		m.SessionID = r.uvarint()
	case *HeartbeatAck:
		m.Period = r.varint()
		m.Status = statemachine.NodeStatus(r.enum(nodeStatusNames, "node status"))
	case *AssignmentsRequest:
		m.NodeID = r.nodeID()
		m.SessionID = r.uvarint()
		m.Cursor = r.cursor(m.Cursor, "cursor")
		m.Wait = r.varint()
	case *Assignments:
		g := gatherer{end: len(p)}
		r.assignments(m, &g)
	case *StatusBatch:
		m.NodeID = r.nodeID()
		m.SessionID = r.uvarint()
		m.Reports = r.reports(m.Reports)
		m.ReReport = r.bool("re_report")
		m.Held = r.taskIDs(m.Held, "held")
	case *StatusAck:
		n := r.count(1, "results")
		m.Results = m.Results[:0]
		if n == 0 {
			m.Results = nil
		}
		for range n {
			r.more("results")
			m.Results = append(m.Results, ReportResult(r.enum(reportResultList, "report result")))
		}
		m.Messages = r.strings(m.Messages, "messages", true)
		if len(m.Messages) != 0 && len(m.Messages) != len(m.Results) {
			r.fail("%d messages for %d results (want as many, or none)", len(m.Messages), len(m.Results))
		}
	case *SyncRequest:
		m.NodeID = r.nodeID()
		m.SessionID = r.uvarint()
		m.Seqs = r.uvarints(m.Seqs, "seqs")
		m.Held = r.taskIDs(m.Held, "held")
	case *SyncAnswer:
		m.Destroy = r.taskIDs(m.Destroy, "destroy")
	case *LogBatch:
		r.logBatch(m)
	case *LogAck:
		m.Stop = r.bool("stop")
	default:
		return errorf(ErrType, "%T is not a wire message", m)
	}
	r.numbers()
	return r.err
}

func (r *reader) labels(m map[string]string) map[string]string {
	n := r.count(2, "labels")
	if n == 0 {
		return nil
	}
	if m == nil {
		m = make(map[string]string, n)
	}
	for range n {
		r.more("labels")
		k := r.name("label key")
		m[k] = r.string("label value")
	}
	return m
}

func (r *reader) assignments(m *Assignments, g *gatherer) {
	m.Kind = FrameKind(r.enum(frameKindNames, "frame kind"))
	f := r.bounded(flagResync|flagLast, "flags")
	m.Resync, m.Last = f&flagResync != 0, f&flagLast != 0
	// The two cursors and the sequences have a number per group each:
	// those without room of their own share one array.
	var shared []uint64
	m.AppliesTo = Cursor(r.sharedUvarints(m.AppliesTo, &shared, 3, "applies_to"))
	m.ResultsIn = Cursor(r.sharedUvarints(m.ResultsIn, &shared, 2, "results_in"))
	m.Seqs = r.sharedUvarints(m.Seqs, &shared, 1, "seqs")
	for _, c := range []struct {
		c     Cursor
		field string
	}{{m.AppliesTo, "applies_to"}, {m.ResultsIn, "results_in"}} {
		if len(c.c) > maxCursorGroups {
			r.fail("%s has %d groups, more than %d", c.field, len(c.c), maxCursorGroups)
		}
	}

	n := r.count(1, "specs")
	m.Specs = resize(m.Specs, n)
	for i := range m.Specs {
		s := &m.Specs[i]
		r.more("specs")
		rest := r.enter("spec")
		g.gather(r, &s.Service, "service", true)
		s.Version = r.u32("spec version")
		s.Command = g.strings(r, s.Command, "command")
		s.Env = g.strings(r, s.Env, "env")
		g.gather(r, &s.Dir, "dir", true)
		s.StopGrace = r.varint()
		r.leave(rest)
	}

	// Tasks whose Addresses have no room share one slab: a frame's
	// addresses cost one allocation, not one per task (and their strings
	// none of their own, see gather).
	var slab []Address
	n = r.count(1, "tasks")
	m.Tasks = resize(m.Tasks, n)
	for i := range m.Tasks {
		a := &m.Tasks[i]
		r.more("tasks")
		rest := r.enter("task")
		a.Task = statemachine.TaskID(r.uvarint())
		g.gather(r, &a.Service, "service", true)
		a.Slot = r.u32("slot")
		a.SpecVersion = r.u32("spec version")
		a.Desired = statemachine.DesiredState(r.enum(desiredNames, "desired state"))
		a.State = statemachine.TaskState(r.enum(taskStateNames, "task state"))
		na := r.count(1, "addresses")
		if na <= cap(a.Addresses) || na == 0 {
			a.Addresses = grow(a.Addresses, na)
		} else {
			if na > cap(slab)-len(slab) {
				// Room for this task's addresses and as many for each task
				// left, but no more than the bytes left could hold (an
				// address takes at least one).
				slab = make([]Address, 0, min(na*(n-i), max(na, r.v.Len())))
			}
			l := len(slab)
			slab = slab[:l+na]
			a.Addresses = slab[l : l+na : l+na]
		}
		for j := range a.Addresses {
			ad := &a.Addresses[j]
			r.more("addresses")
			rest := r.enter("address")
			g.gather(r, &ad.Network, "network", true)
			g.gather(r, &ad.Addr, "addr", false)
			r.leave(rest)
		}
		r.leave(rest)
	}
	m.Removed = r.taskIDs(m.Removed, "removed")
	g.gather(r, &m.Leader, "leader", false) // "" from an older sender, which ends before it
	m.Logs = r.logSubscriptions(m.Logs)
	g.flush()
}

func (r *reader) reports(dst []StatusReport) []StatusReport {
	n := r.count(1, "reports")
	dst = grow(dst, n)
	for i := range dst {
		p := &dst[i]
		r.more("reports")
		rest := r.enter("report")
		p.Task = statemachine.TaskID(r.uvarint())
		p.State = statemachine.TaskState(r.enum(taskStateNames, "task state"))
		p.ExitCode = r.i32("exit code")
		p.Message = r.name("message")
		p.At = r.varint()
		r.leave(rest)
	}
	return dst
}

// resize returns dst resized to n elements, reusing its storage and keeping
// what the elements held: the caller assigns every field (a read past the
// end gives zero), and nested slices reuse their storage; nil for n == 0.
func resize[T any](dst []T, n int) []T {
	if n == 0 {
		return nil
	}
	return slices.Grow(dst[:0], n)[:n]
}

// grow returns dst resized to n zeroed elements, reusing its storage; nil
// for n == 0.
func grow[T any](dst []T, n int) []T {
	if n == 0 {
		return nil
	}
	dst = slices.Grow(dst[:0], n)[:n]
	clear(dst)
	return dst
}
