package duty

import (
	"errors"

	"shoal/sched"
	"shoal/statemachine"
)

// The plan is the driver's second pure stage, a value function in Nomad's
// shape: (node table, pending batches, seed) → (assignments, why each batch
// that keeps tasks pending does). Global services go first (each of their
// tasks has one possible node, checked with CheckNode); replicated batches
// are placed with sched.Place. Every assignment is reserved in the table,
// so later batches see it.

// assignment is one planned CmdAssign and what it reserved in the table.
// It holds no pointer: a ramp's plan of a million assignments is one
// allocation the collector need not scan (the commands are made from it
// as they are submitted, see commands).
type assignment struct {
	task          statemachine.TaskID
	group         int
	node, service uint32
	cpu, mem      int64
}

// plan is one run's decision.
type plan struct {
	assigns []assignment
	// placed counts each batch's assignments (in batch order: a
	// replicated batch's first placed tasks are assigned).
	placed map[batchKey]int
	why    map[batchKey]error
	// taskWhy: why each task of a global batch that stays pending does.
	taskWhy map[statemachine.TaskID]error
}

// makePlan places every batch on t (which it updates) and appends the
// assignments to buf, which it grows at most once, to the batches' tasks.
func makePlan(t *sched.Table, batches []*batch, seed uint64, buf []assignment) plan {
	pending := 0
	for _, b := range batches {
		pending += len(b.tasks)
	}
	if cap(buf) < pending {
		buf = make([]assignment, 0, pending)
	}
	p := plan{assigns: buf[:0], placed: make(map[batchKey]int), why: make(map[batchKey]error),
		taskWhy: make(map[statemachine.TaskID]error)}
	for _, global := range []bool{true, false} {
		for _, b := range batches {
			if b.global != global {
				continue
			}
			if b.perr != nil {
				p.why[b.batchKey] = b.perr
				continue
			}
			before := len(p.assigns)
			if global {
				placeGlobal(t, b, &p)
			} else {
				placeReplicated(t, b, &p, seed)
			}
			if n := len(p.assigns) - before; n > 0 {
				p.placed[b.batchKey] += n
			}
		}
	}
	return p
}

// add appends one assignment of b's.
func (p *plan) add(b *batch, task statemachine.TaskID, node uint32) {
	p.assigns = append(p.assigns, assignment{task: task, group: b.group, node: node, service: b.sg.Service, cpu: b.sg.CPU, mem: b.sg.Mem})
}

// placeReplicated places a replicated batch's tasks with sched.Place, in
// task order.
func placeReplicated(t *sched.Table, b *batch, p *plan, seed uint64) {
	g := b.sg
	g.Count = len(b.tasks)
	pl, err := t.Place(g, placementSeed(seed, b.batchKey))
	if err != nil {
		p.why[b.batchKey] = err
	}
	i := 0
	for j, node := range pl.Nodes {
		for range pl.Counts[j] {
			p.add(b, b.tasks[i], node)
			i++
		}
	}
}

// commands returns the plan's CmdAssign commands, parallel to assigns, in
// buf if it is large enough.
func (p *plan) commands(buf []statemachine.Command) []statemachine.Command {
	if cap(buf) < len(p.assigns) {
		buf = make([]statemachine.Command, len(p.assigns))
	}
	cmds := buf[:len(p.assigns)]
	for i := range p.assigns {
		cmds[i] = statemachine.Command{Kind: statemachine.CmdAssign, Task: p.assigns[i].task, Node: statemachine.NodeID(p.assigns[i].node)}
	}
	return cmds
}

// placeGlobal checks each task of a global batch on its own node.
func placeGlobal(t *sched.Table, b *batch, p *plan) {
	g := b.sg
	g.Count = 1
	for i, task := range b.tasks {
		node := b.slots[i]
		if err := t.CheckNode(g, node); err != nil {
			if p.why[b.batchKey] == nil {
				p.why[b.batchKey] = err
			}
			p.taskWhy[task] = err
			continue
		}
		if t.AddTask(node, g.Service, g.CPU, g.Mem) == nil {
			p.add(b, task, node)
		}
	}
}

// unschedulable lists the batches the plan leaves pending, in batch order.
func (p *plan) unschedulable(batches []*batch) []Unschedulable {
	var out []Unschedulable
	for _, b := range batches {
		if err := p.why[b.batchKey]; err != nil {
			out = append(out, Unschedulable{Group: b.group, Service: b.service, Name: b.name,
				SpecVersion: b.version, Pending: len(b.tasks) - p.placed[b.batchKey], Err: err})
		}
	}
	return out
}

// reasonOf is the part of a placement error that says why, without the
// counts that change from run to run (so a reason is logged once).
func reasonOf(err error) string {
	var ue *sched.UnplacedError
	if errors.As(err, &ue) {
		return sched.ErrNoSuitableNode.Error() + ": " + ue.Why.String()
	}
	var ne *sched.NodeError
	if errors.As(err, &ne) {
		return sched.ErrNodeUnsuitable.Error() + ": " + ne.Reason.String()
	}
	return err.Error()
}
