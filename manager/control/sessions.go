package control

import (
	"sync"

	"shoal/statemachine"
)

// sessionTable holds this manager's record of each agent session: what
// its answers carried. A long poll finds its record without a lock (a
// table-wide mutex had 649 polls of one replica waiting while 10,000
// agents reconnected), and a node keeps one record here: its newest
// session's, so reconnects do not pile records up.
type sessionTable struct {
	byID sync.Map // session ID → *session
	mu   sync.Mutex
	last map[statemachine.NodeID]uint64 // the node's newest session here
}

// get returns session id's record for node, making it when the agent
// opened the session elsewhere (or the record went).
func (t *sessionTable) get(id uint64, node statemachine.NodeID) *session {
	if v, ok := t.byID.Load(id); ok && v.(*session).node == node {
		return v.(*session)
	}
	return t.open(id, node)
}

// open records session id of node, dropping the node's older record.
func (t *sessionTable) open(id uint64, node statemachine.NodeID) *session {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.byID.Load(id); ok && v.(*session).node == node {
		return v.(*session) // made meanwhile by another request of the session
	}
	ss := &session{node: node}
	t.byID.Store(id, ss)
	if t.last == nil {
		t.last = make(map[statemachine.NodeID]uint64)
	}
	if old, ok := t.last[node]; ok && old != id {
		t.byID.Delete(old)
	}
	t.last[node] = id
	return ss
}

// size returns how many session records are held.
func (t *sessionTable) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.last)
}
