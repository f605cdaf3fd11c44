package sched

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Errors. Match them with errors.Is; the returned errors add context. Their
// text reaches users as it is (the API passes rejections through), so it
// names no package.
var (
	ErrInvalidConstraint = errors.New("invalid constraint")
	ErrInvalidPreference = errors.New("invalid preference")
	ErrInvalidRequest    = errors.New("invalid placement request")
	ErrUnknownNode       = errors.New("unknown node")
	ErrNoSuchTask        = errors.New("no such task")
	ErrNoSuitableNode    = errors.New("no suitable node")
	ErrNodeUnsuitable    = errors.New("node cannot run the task")
)

// Explanation counts, per reason, the nodes that cannot take one more task
// of a group. Each node is counted once, under the first reason that
// applies (the order of the Reason constants; constraints in group order).
type Explanation struct {
	Nodes       int // nodes in the table
	NotReady    int
	Paused      int
	Drained     int
	Constraints []ConstraintCount // one per constraint of the group
	CPU         int
	Memory      int
	MaxPerNode  int
	// What one task of the group reserves (milli-cores, bytes) and its
	// per-node limit, so that a message can say how much was short.
	WantCPU, WantMemory int64
	WantMaxPerNode      int
}

// ConstraintCount is how many nodes one constraint excluded.
type ConstraintCount struct {
	Constraint Constraint
	Excluded   int
}

// String renders the counts a user can act on, e.g. "constraint
// node.labels.zone==b excluded 7 nodes, insufficient memory on 3 nodes (a
// task reserves 2 GiB)".
func (e Explanation) String() string {
	if e.Nodes == 0 {
		return "no nodes in the cluster"
	}
	var parts []string
	add := func(n int, format string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf(format, nodes(n)))
		}
	}
	add(e.NotReady, "%s not ready")
	add(e.Paused, "%s paused")
	add(e.Drained, "%s drained")
	for _, c := range e.Constraints {
		switch {
		case c.Excluded == 1 && e.Nodes == 1:
			parts = append(parts, fmt.Sprintf("constraint %s does not match the only node", c.Constraint))
		case c.Excluded == e.Nodes:
			parts = append(parts, fmt.Sprintf("constraint %s matches none of the %d nodes", c.Constraint, c.Excluded))
		case c.Excluded > 0:
			parts = append(parts, fmt.Sprintf("constraint %s excluded %s", c.Constraint, nodes(c.Excluded)))
		}
	}
	add(e.CPU, "insufficient CPU on %s"+fmt.Sprintf(" (a task reserves %d milli-cores)", e.WantCPU))
	add(e.Memory, "insufficient memory on %s"+fmt.Sprintf(" (a task reserves %s)", Bytes(e.WantMemory)))
	add(e.MaxPerNode, fmt.Sprintf("max %d replicas per node", e.WantMaxPerNode)+" reached on %s")
	return strings.Join(parts, ", ")
}

// Bytes renders a byte count for a user: "512 MiB", "1.5 GiB", "100 bytes".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " bytes"
	}
	v, i := float64(n), -1
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + [...]string{"KiB", "MiB", "GiB", "TiB", "PiB"}[i]
}

func nodes(n int) string {
	if n == 1 {
		return "1 node"
	}
	return strconv.Itoa(n) + " nodes"
}

// UnplacedError reports that Place could not place every task of a group.
type UnplacedError struct {
	Service uint32
	Wanted  int // Request.Count
	Placed  int
	Why     Explanation // the state after the tasks that fit were placed
}

func (e *UnplacedError) Error() string {
	return fmt.Sprintf("%s for %d of %d tasks of service %d (%s)",
		ErrNoSuitableNode, e.Wanted-e.Placed, e.Wanted, e.Service, e.Why)
}

func (e *UnplacedError) Unwrap() error { return ErrNoSuitableNode }

// NodeError says why one node cannot run a task of a group.
type NodeError struct {
	Node    uint32
	Service uint32
	Reason  Reason
	Detail  string // e.g. "task needs 512 MiB, node has 256 MiB free"
}

func (e *NodeError) Error() string {
	return fmt.Sprintf("node %d cannot run a task of service %d: %s (%s)",
		e.Node, e.Service, e.Reason, e.Detail)
}

func (e *NodeError) Unwrap() error { return ErrNodeUnsuitable }

// CheckNode reports whether node id can run one more task of g, as for a
// global service whose task is bound to its node: nil, or a *NodeError
// (errors.Is ErrNodeUnsuitable) naming the first reason it cannot.
func (t *Table) CheckNode(g Request, id uint32) error {
	if err := validateRequest(g); err != nil {
		return err
	}
	r, ok := t.row[id]
	if !ok {
		return fmt.Errorf("%w %d", ErrUnknownNode, id)
	}
	reason, ci := t.reject(g, r)
	if reason == ReasonNone {
		return nil
	}
	e := &NodeError{Node: id, Service: g.Service, Reason: reason}
	switch reason {
	case ReasonNotReady:
		e.Detail = "node is " + t.status[r].String()
	case ReasonPaused, ReasonDrained:
		e.Detail = "node availability is " + t.avail[r].String()
	case ReasonConstraint:
		c := g.Constraints[ci]
		e.Detail = "constraint " + c.String() + " not satisfied: " + t.describe(c, r)
	case ReasonCPU:
		e.Detail = fmt.Sprintf("task needs %d milli-cores, node has %d free of %d",
			g.CPU, t.cpuCap[r]-t.cpuRes[r], t.cpuCap[r])
	case ReasonMemory:
		e.Detail = fmt.Sprintf("task needs %s of memory, node has %s free of %s",
			Bytes(g.Mem), Bytes(t.memCap[r]-t.memRes[r]), Bytes(t.memCap[r]))
	case ReasonMaxPerNode:
		e.Detail = fmt.Sprintf("node runs %d tasks of the service, max %d",
			t.serviceCount(g.Service, r), g.MaxPerNode)
	}
	return e
}

// describe states the node attribute a constraint compared.
func (t *Table) describe(c Constraint, r int32) string {
	switch c.Field {
	case FieldID:
		return "node.id is " + strconv.FormatUint(uint64(t.id[r]), 10)
	case FieldHostname:
		return "node.hostname is " + strconv.Quote(t.hostname[r])
	case FieldRole:
		return "node.role is " + t.role[r].String()
	}
	if v, ok := t.labels[r][c.Key]; ok {
		return "node.labels." + c.Key + " is " + strconv.Quote(v)
	}
	return "node has no label " + strconv.Quote(c.Key)
}

// reject returns the first reason row r cannot take one more task of g, and
// for ReasonConstraint the index of the failing constraint.
func (t *Table) reject(g Request, r int32) (Reason, int) {
	switch {
	case t.status[r] != StatusReady:
		return ReasonNotReady, -1
	case t.avail[r] == AvailabilityPause:
		return ReasonPaused, -1
	case t.avail[r] != AvailabilityActive:
		return ReasonDrained, -1
	}
	for i, c := range g.Constraints {
		if !t.matches(c, r) {
			return ReasonConstraint, i
		}
	}
	switch {
	case g.CPU > 0 && t.cpuCap[r]-t.cpuRes[r] < g.CPU:
		return ReasonCPU, -1
	case g.Mem > 0 && t.memCap[r]-t.memRes[r] < g.Mem:
		return ReasonMemory, -1
	case g.MaxPerNode > 0 && int64(t.serviceCount(g.Service, r)) >= int64(g.MaxPerNode):
		return ReasonMaxPerNode, -1
	}
	return ReasonNone, -1
}

// explain counts why each node cannot take one more task of g. It runs only
// when a placement falls short, so it scans rows one by one.
func (t *Table) explain(g Request) Explanation {
	e := Explanation{Nodes: len(t.row), WantCPU: g.CPU, WantMemory: g.Mem, WantMaxPerNode: g.MaxPerNode}
	if len(g.Constraints) > 0 {
		e.Constraints = make([]ConstraintCount, len(g.Constraints))
		for i, c := range g.Constraints {
			e.Constraints[i].Constraint = c
		}
	}
	for r := range t.id {
		if !t.live[r] {
			continue
		}
		reason, ci := t.reject(g, int32(r))
		switch reason {
		case ReasonNotReady:
			e.NotReady++
		case ReasonPaused:
			e.Paused++
		case ReasonDrained:
			e.Drained++
		case ReasonConstraint:
			e.Constraints[ci].Excluded++
		case ReasonCPU:
			e.CPU++
		case ReasonMemory:
			e.Memory++
		case ReasonMaxPerNode:
			e.MaxPerNode++
		}
	}
	return e
}
