package control

import (
	"context"
	"slices"
	"time"

	"shoal/route"
	"shoal/statemachine"
	"shoal/wire"
)

// Registrar is what opening a session needs of the cluster: a local read
// of the cluster group and the leader duties' submitter (duty.Submitter has
// these methods). Submit commits a node's reservation; SubmitBeforeFanout
// commits the node's creation and returns once the cluster group applied
// it, leaving the service groups to the outbox duty.
type Registrar interface {
	ReadLocal(group int, fn func(*statemachine.State)) error
	Submit(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error)
	SubmitBeforeFanout(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error)
}

// NodeSpec is what the joining agent owns of its node: its hostname,
// labels and resources. Role and status are not the agent's: a node it
// registers is a worker, and its status belongs to the node monitor.
type NodeSpec struct {
	Hostname string
	Labels   map[string]string
	CPU      int64 // milli-cores
	Memory   int64 // bytes
}

// SpecOf returns the part of an agent's node description it owns.
func SpecOf(d wire.NodeDescription) NodeSpec {
	return NodeSpec{Hostname: d.Hostname, Labels: d.Labels, CPU: d.CPU, Memory: d.Memory}
}

// Node returns the node the cluster creates for spec under id: a worker,
// ready (the node monitor takes its status over from its first
// heartbeat).
func (s NodeSpec) Node(id statemachine.NodeID) *statemachine.Node {
	return &statemachine.Node{ID: id, Name: s.Hostname, Role: statemachine.RoleWorker, Labels: s.Labels,
		CPU: s.CPU, Memory: s.Memory, Status: statemachine.NodeReady}
}

// ClusterView is what a session request reads of the cluster group, as
// this replica applied it.
type ClusterView struct {
	Nodes    int  // nodes the cluster holds
	Known    bool // the request's node is one of them
	Removed  bool // the request's node was removed
	Managers []string
}

// ViewOf reads what a session request of node (0: a new node) needs of
// the cluster group's state; Managers are sorted.
func ViewOf(st *statemachine.State, node statemachine.NodeID) ClusterView {
	v := ClusterView{Nodes: st.NumNodes()}
	if node != 0 {
		v.Known, v.Removed = st.Node(node) != nil, st.NodeRemoved(node)
	}
	for _, addr := range st.Managers() {
		v.Managers = append(v.Managers, addr)
	}
	slices.Sort(v.Managers)
	return v
}

// Admission is what a session request decides for its node.
type Admission uint8

const (
	// AdmitKnown: the node exists; the session opens, nothing is committed.
	AdmitKnown Admission = iota
	// AdmitNew: a new node; its ID is reserved (SessionPlan.Reserve) and
	// the node created before the session opens.
	AdmitNew
)

// SessionPlan is a session request's decision: a known node, or a new
// node's reservation and spec.
type SessionPlan struct {
	Admission Admission
	Reserve   statemachine.Command // AdmitNew: CmdReserveNodeID
	Spec      NodeSpec             // AdmitNew: the node to create
}

// MaxKeyLen is the longest key a session request may carry.
const MaxKeyLen = 48

// The answers a session request can be refused with (each a new value:
// the caller may keep or change it).
func errNoHostname() *wire.Error {
	return &wire.Error{Code: wire.CodeBadRequest, Message: "the session request needs the node's hostname"}
}

func errKeyTooLong() *wire.Error {
	return &wire.Error{Code: wire.CodeBadRequest, Message: "the session request's key is longer than 48 bytes"}
}

// errNotYet: this replica may not have applied the node's creation yet.
func errNotYet() *wire.Error {
	return &wire.Error{Code: wire.CodeUnavailable, Message: "this manager does not know the node yet; retry",
		RetryAfter: int64(500 * time.Millisecond)}
}

func errRemoved() *wire.Error {
	return &wire.Error{Code: wire.CodeNodeRemoved,
		Message: "this node was removed from the cluster; clear the agent's data directory to join as a new node"}
}

// PlanSession decides a session request over what it read of the cluster
// group: a request without hostname is refused (bad request); a node ID
// this replica neither knows nor saw removed asks for a retry (its
// creation may not be applied here yet); a removed node is refused for
// good (node removed); a known node is admitted as it is; a new node (ID
// 0) gets a reservation, which carries "node:"+key as its request ID when
// the agent sent a key (at most MaxKeyLen bytes), so a first session asked
// again of any manager after its answer was lost finds the node the first
// attempt reserved (the cluster applies a request ID at most once).
func PlanSession(req *wire.SessionRequest, v ClusterView) (SessionPlan, *wire.Error) {
	if req.Node.Hostname == "" {
		return SessionPlan{}, errNoHostname()
	}
	switch {
	case req.NodeID != 0 && !v.Known && !v.Removed:
		return SessionPlan{}, errNotYet()
	case v.Removed:
		return SessionPlan{}, errRemoved()
	case req.NodeID != 0:
		return SessionPlan{Admission: AdmitKnown}, nil
	}
	reserve := statemachine.Command{Kind: statemachine.CmdReserveNodeID}
	if req.Key != "" {
		if len(req.Key) > MaxKeyLen {
			return SessionPlan{}, errKeyTooLong()
		}
		reserve.RequestID = "node:" + req.Key
	}
	return SessionPlan{Admission: AdmitNew, Reserve: reserve, Spec: SpecOf(req.Node)}, nil
}

// Opened is what a session's answer needs: the node (new or known), the
// number of nodes the cluster held (the node monitor's heartbeat period
// depends on it) and the managers' API addresses, sorted.
type Opened struct {
	Node     statemachine.NodeID
	Nodes    int
	Managers []string
}

// OpenSession registers a session request's node: it reads the cluster
// group locally, decides (PlanSession) and, for a new node, reserves its
// ID (Submit) and creates it (SubmitBeforeFanout). The session's ID and
// record are the caller's. Its errors are the plan's *wire.Error or the
// cluster's.
func OpenSession(ctx context.Context, r Registrar, req *wire.SessionRequest) (Opened, error) {
	if req.Node.Hostname == "" {
		return Opened{}, errNoHostname() // before any read, as the plan would
	}
	var v ClusterView
	if err := r.ReadLocal(route.ClusterGroup, func(st *statemachine.State) { v = ViewOf(st, req.NodeID) }); err != nil {
		return Opened{}, err
	}
	p, e := PlanSession(req, v)
	if e != nil {
		return Opened{}, e
	}
	out := Opened{Node: req.NodeID, Nodes: v.Nodes, Managers: v.Managers}
	if p.Admission == AdmitNew {
		res, err := r.Submit(ctx, p.Reserve)
		if err != nil {
			return Opened{}, err
		}
		out.Node = statemachine.NodeID(res.ID)
		cmd := statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: p.Spec.Node(out.Node)}
		if _, err := r.SubmitBeforeFanout(ctx, cmd); err != nil {
			return Opened{}, err
		}
	}
	return out, nil
}
