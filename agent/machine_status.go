package agent

import (
	"cmp"
	"slices"
	"time"

	"shoal/wire"
)

// statusState is the machine's status batching state. The machine keeps the
// latest status per task; a task is owed to the manager while its latest
// status differs from the last one acknowledged.
type statusState struct {
	cfg        MachineConfig
	inflight   bool      // a batch is out and unanswered
	lastEnd    time.Time // when the last batch was answered (or failed)
	lastFailed bool      // the last batch failed: wait a full routine interval
	// batch is BeginBatch's buffer of the tasks it takes, kept between
	// batches (one allocation per batch otherwise).
	batch []*task
}

// noteStatus keeps the set of owed statuses in step with t. Only tasks in
// the assignment set are reported: the manager has forgotten the others.
func (m *Machine) noteStatus(t *task) {
	owed := t.inSet && t.status != t.acked
	if owed != t.owed {
		t.owed = owed
		if owed {
			m.nOwed++
		} else {
			m.nOwed--
		}
	}
	if owed && !t.inOwed {
		if len(m.owed) >= 2*m.nOwed+64 {
			m.owedTasks() // acknowledged since the last walk: keep the list short
		}
		t.inOwed = true
		m.owed = append(m.owed, t)
	}
}

// owedTasks returns the tasks whose status is owed, in no order, pruning
// the list of those no longer owed.
func (m *Machine) owedTasks() []*task {
	kept := m.owed[:0]
	for _, t := range m.owed {
		if t.owed {
			kept = append(kept, t)
		} else {
			t.inOwed = false
		}
	}
	clear(m.owed[len(kept):]) // keep no references for the collector
	m.owed = kept
	return kept
}

// Unacked returns how many statuses the manager has not acknowledged.
func (m *Machine) Unacked() int { return m.nOwed }

// FlushDue returns when the next status batch should go out, or false when
// nothing is owed or a batch is still unanswered. Urgent changes (a task's
// state changed) go UrgentDelay after the last batch was answered; other
// owed statuses (refused for now with ReportRetry, or after a failed send)
// RoutineInterval after it. The interval always counts from the end of the
// last send, so a slow or failing manager is never hammered.
func (m *Machine) FlushDue() (time.Time, bool) {
	if m.st.inflight {
		return time.Time{}, false
	}
	owed, urgent := false, false
	for _, t := range m.owedTasks() {
		if t.sending {
			continue
		}
		owed = true
		if t.urgent {
			urgent = true
			break
		}
	}
	if !owed {
		return time.Time{}, false
	}
	iv := m.st.cfg.RoutineInterval
	if urgent && !m.st.lastFailed {
		iv = m.st.cfg.UrgentDelay
	}
	return m.st.lastEnd.Add(iv), true
}

// EarliestDue is the soonest FlushDue can answer until the next batch
// ends: a change of what is owed moves the answer between this and later,
// never before it (the interval counts from the last batch's end, and an
// urgent change waits UrgentDelay at least, a full RoutineInterval after a
// failure).
func (m *Machine) EarliestDue() time.Time {
	iv := m.st.cfg.RoutineInterval
	if !m.st.lastFailed {
		iv = min(iv, m.st.cfg.UrgentDelay)
	}
	return m.st.lastEnd.Add(iv)
}

// BeginBatch takes up to limit owed statuses (lowest task IDs first) for one
// batch; the caller must answer with EndBatch, even for an empty batch.
func (m *Machine) BeginBatch(limit int) []wire.StatusReport {
	m.st.inflight = true
	ts := m.st.batch[:0] // the machine's own, never handed out
	if cap(ts) < m.nOwed {
		ts = make([]*task, 0, m.nOwed)
	}
	for _, t := range m.owedTasks() {
		if !t.sending {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, func(a, b *task) int { return cmp.Compare(a.a.Task, b.a.Task) })
	if len(ts) > limit {
		ts = ts[:limit]
	}
	out := make([]wire.StatusReport, len(ts))
	for i, t := range ts {
		t.sending, t.urgent = true, false
		out[i] = t.status
	}
	clear(ts[:cap(ts)]) // keep no tasks for the collector
	if m.st.batch = ts[:0]; cap(ts) > 1024 {
		m.st.batch = nil // a re-report's room is not kept for good
	}
	return out
}

// EndBatch applies the manager's answer to a batch from BeginBatch; ack nil
// means the send failed and every status stays owed. Accepted statuses are
// acknowledged (and persisted as such); rejected ones are dropped, never
// resent; ReportRetry, or a missing result, leaves a status owed for the
// next routine flush. A status that changed while the batch was out stays
// owed in its new form.
func (m *Machine) EndBatch(reports []wire.StatusReport, ack *wire.StatusAck, now time.Time) {
	m.st.inflight, m.st.lastEnd, m.st.lastFailed = false, now, ack == nil
	for i, r := range reports {
		t := m.tasks[r.Task]
		if t == nil {
			continue
		}
		t.sending = false
		if ack == nil {
			continue
		}
		res := wire.ReportRetry
		if i < len(ack.Results) {
			res = ack.Results[i]
		}
		if res == wire.ReportAccepted || res == wire.ReportRejected {
			t.acked = r
			m.markTask(t)
		}
		m.noteStatus(t)
	}
}

// owedIdle returns how many owed statuses are not in an unanswered batch.
func (m *Machine) owedIdle() int {
	n := 0
	for _, t := range m.owedTasks() {
		if !t.sending {
			n++
		}
	}
	return n
}
