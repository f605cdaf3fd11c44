package api

import (
	"strconv"
	"time"

	"shoal/manager/control"
	"shoal/statemachine"
)

// The lines of task events with their task are most of what an event
// stream writes (a ramp is a few of them per task), and the general path
// (renderTaskTo's client.Task, then the JSON codec) spent most of a render
// in the codec and in strings made only to be copied into the line. This
// file writes those lines straight from the state, for the values whose
// bytes are plain to write (every string printable ASCII that JSON writes
// as it is); anything else takes the general path. The bytes are the
// general path's (TestTaskEventLinesAreTheCodecs compares them).

// appendTaskEvent appends to b the line client.Event{Group: group, Raft:
// raft, Topic: "task", Type: typ (plain: topicOf's), Key: t's ID, Task: renderTaskTo(st, t,
// false)} encodes to, index empty (emptyIndex), newline included. ok is
// false, and b as it was, when a string in it is not plain (plainJSON).
func appendTaskEvent(b []byte, group int, raft uint64, typ string, st *statemachine.State, t *statemachine.Task) (_ []byte, ok bool) {
	start := len(b)
	desired, state := t.Desired.String(), t.Status.State.String() // plain: names of the enums' tables, or Kind(n)
	if !plainJSON(t.Message()) {
		return b, false
	}
	b = append(b, emptyIndex...)
	b = append(b, `"group":`...)
	b = strconv.AppendInt(b, int64(group), 10)
	b = append(b, `,"raft":`...)
	b = strconv.AppendUint(b, raft, 10)
	b = append(b, `,"topic":"task","type":"`...)
	b = append(b, typ...)
	b = append(b, `","key":"`...)
	b = strconv.AppendUint(b, uint64(t.ID), 10)
	b = append(b, `","task":{"id":"`...)
	b = strconv.AppendUint(b, uint64(t.ID), 10)
	b = append(b, `","service":"`...)
	if svc := st.Service(t.Service); svc != nil {
		if !plainJSON(svc.Spec.Name) {
			return b[:start], false
		}
		b = append(b, svc.Spec.Name...)
	}
	b = append(b, `","slot":`...)
	b = strconv.AppendUint(b, uint64(t.Slot), 10)
	b = append(b, `,"spec_version":`...)
	b = strconv.AppendUint(b, uint64(t.SpecVersion), 10)
	if node := uint32(t.Node); node != 0 {
		b = append(b, `,"node":`...)
		b = strconv.AppendUint(b, uint64(node), 10)
	}
	if n := st.Node(t.Node); n != nil && n.Name != "" {
		if !plainJSON(n.Name) {
			return b[:start], false
		}
		b = append(b, `,"node_name":"`...)
		b = append(b, n.Name...)
		b = append(b, '"')
	}
	b = append(b, `,"desired":"`...)
	b = append(b, desired...)
	b = append(b, `","state":"`...)
	b = append(b, state...)
	b = append(b, '"')
	if t.Status.ExitCode != 0 {
		b = append(b, `,"exit_code":`...)
		b = strconv.AppendInt(b, int64(t.Status.ExitCode), 10)
	}
	if t.Message() != "" {
		b = append(b, `,"message":"`...)
		b = append(b, t.Message()...)
		b = append(b, '"')
	}
	b = append(b, `,"since":"`...)
	b = unixTime(t.Status.Timestamp).AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	for i, a := range t.Attachments {
		if i == 0 {
			b = append(b, `,"addresses":[`...)
		} else {
			b = append(b, ',')
		}
		b = append(b, `{"network":"`...)
		if nw := st.Network(a.Network); nw != nil {
			if !plainJSON(nw.Name) {
				return b[:start], false
			}
			b = append(b, nw.Name...)
		}
		b = append(b, `","addr":"`...)
		b = control.AppendAttachmentAddr(b, st, a)
		b = append(b, '"')
		if a.Released {
			b = append(b, `,"released":true`...)
		}
		b = append(b, '}')
		if i == len(t.Attachments)-1 {
			b = append(b, ']')
		}
	}
	return append(b, "}}\n"...), true
}

// plainJSON says whether JSON writes s as it is between its quotes: every
// byte printable ASCII, none of the ones the codec escapes (the quote, the
// backslash, and <, > and & as the codec escapes them for HTML).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainByte[s[i]] {
			return false
		}
	}
	return true
}

var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()
