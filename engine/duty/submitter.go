package duty

import (
	"context"

	"shoal/route"
	"shoal/statemachine"
)

// Submitter makes a raw Cluster — one whose SubmitMany only routes each
// command to its group and waits, as *engine.Engine's does — submit as
// users, agents and the duties expect: a node or network removal is first
// checked with every service group (Precheck), and once the cluster group
// applied a node or network command its outbox is delivered to the service
// groups (Deliveries: concurrent submitters share delivery runs) before
// SubmitMany returns; what a crash cuts short there, the outbox duty
// re-drives. Memory's own SubmitMany does the same.
//
// A Submitter is a Cluster itself: manager.Start hands it to the duties and
// to the API. Safe for concurrent use.
type Submitter struct {
	c          Cluster
	logf       func(string, ...any)
	deliveries *Deliveries
}

var _ Cluster = (*Submitter)(nil)

// NewSubmitter returns c with the removal check and the outbox delivery;
// logf (nil: discard) gets a line when a delivery fails.
func NewSubmitter(c Cluster, logf func(string, ...any)) *Submitter {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Submitter{c: c, logf: logf, deliveries: NewDeliveries(c)}
}

// Groups returns the number of service groups.
func (s *Submitter) Groups() int { return s.c.Groups() }

// Read is the cluster's linearizable read.
func (s *Submitter) Read(ctx context.Context, group int, fn func(*statemachine.State)) error {
	return s.c.Read(ctx, group, fn)
}

// ReadLocal is the cluster's local read.
func (s *Submitter) ReadLocal(group int, fn func(*statemachine.State)) error {
	return s.c.ReadLocal(group, fn)
}

// SubmitToGroup submits a per-group command as the cluster does (no
// node or network command goes this way).
func (s *Submitter) SubmitToGroup(ctx context.Context, group int, cmd statemachine.Command) (statemachine.Result, error) {
	return s.c.SubmitToGroup(ctx, group, cmd)
}

// Submit is SubmitMany of one command; the error is the command's
// rejection or why it was not applied.
func (s *Submitter) Submit(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error) {
	o := s.SubmitMany(ctx, []statemachine.Command{cmd})[0]
	return o.Result, o.Err()
}

// SubmitMany checks removals, submits the commands that pass and, once
// the cluster group applied any node or network command, delivers its
// outbox before it returns.
func (s *Submitter) SubmitMany(ctx context.Context, cmds []statemachine.Command) []route.Outcome {
	out := s.submit(ctx, cmds)
	for i := range cmds {
		if statemachine.OutboxKind(cmds[i].Kind) && out[i].Failed == nil && out[i].Result.Code == statemachine.CodeOK {
			if err := s.deliveries.Deliver(ctx); err != nil {
				s.logf("delivering the outbox (the outbox duty retries): %v", err)
			}
			break
		}
	}
	return out
}

// assigner is a Cluster that takes a scheduler run's assignments without
// a command per task (*engine.Engine, and a Submitter over one).
type assigner interface {
	SubmitAssigns(ctx context.Context, n int, at func(i int) (statemachine.TaskID, statemachine.NodeID)) []route.Outcome
}

// SubmitAssigns is SubmitMany of n CmdAssign commands, the i-th moving
// task at(i) to its node (nothing to check first, nothing to deliver):
// handed to the cluster as they are when it takes them so, built into
// commands when not.
func (s *Submitter) SubmitAssigns(ctx context.Context, n int, at func(i int) (statemachine.TaskID, statemachine.NodeID)) []route.Outcome {
	return submitAssigns(ctx, s.c, n, at)
}

// submitAssigns hands n assignments to c, as commands if it takes no
// other form.
func submitAssigns(ctx context.Context, c Cluster, n int, at func(i int) (statemachine.TaskID, statemachine.NodeID)) []route.Outcome {
	if a, ok := c.(assigner); ok {
		return a.SubmitAssigns(ctx, n, at)
	}
	cmds := make([]statemachine.Command, n)
	for i := range cmds {
		task, node := at(i)
		cmds[i] = statemachine.Command{Kind: statemachine.CmdAssign, Task: task, Node: node}
	}
	return c.SubmitMany(ctx, cmds)
}

// statuser is a Cluster that takes an agent's status reports without a
// command per report (*engine.Engine, and a Submitter over one).
type statuser interface {
	SubmitStatuses(ctx context.Context, node statemachine.NodeID, n int,
		at func(i int) (statemachine.TaskID, statemachine.TaskState, int32, string)) []route.Outcome
}

// SubmitStatuses is SubmitMany of n CmdTaskStatus commands from node, the
// i-th reporting at(i) (task, state, exit code, message; nothing to check
// first, nothing to deliver): handed to the cluster as they are when it
// takes them so, built into commands when not.
func (s *Submitter) SubmitStatuses(ctx context.Context, node statemachine.NodeID, n int,
	at func(i int) (statemachine.TaskID, statemachine.TaskState, int32, string)) []route.Outcome {
	if st, ok := s.c.(statuser); ok {
		return st.SubmitStatuses(ctx, node, n, at)
	}
	cmds := make([]statemachine.Command, n)
	for i := range cmds {
		task, state, exit, msg := at(i)
		cmds[i] = statemachine.Command{Kind: statemachine.CmdTaskStatus, Task: task, Node: node, State: state, ExitCode: exit, Message: msg}
	}
	return s.c.SubmitMany(ctx, cmds)
}

// SubmitBeforeFanout is Submit for a node or network command whose caller
// needs only the cluster group to have applied it (a worker joining: no
// service group places a task on a node before it knows the node). It
// returns then and leaves the delivery to the service groups to the outbox
// duty, which wakes on the cluster group's outbox and delivers every
// pending entry in one run. Ten thousand agents joining at once each
// waited for a delivery of the growing backlog before; their joins held
// the API's setup slots for seconds, timed out and were retried.
func (s *Submitter) SubmitBeforeFanout(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error) {
	o := s.submit(ctx, []statemachine.Command{cmd})[0]
	return o.Result, o.Err()
}

// submit prechecks removals and submits the rest through the raw cluster,
// one outcome per command.
func (s *Submitter) submit(ctx context.Context, cmds []statemachine.Command) []route.Outcome {
	var out []route.Outcome // made at the first refusal
	for i := range cmds {
		if r := s.precheck(ctx, &cmds[i]); r.Code != statemachine.CodeOK {
			if out == nil {
				out = make([]route.Outcome, len(cmds))
			}
			out[i].Result = r
		}
	}
	if out == nil {
		return s.c.SubmitMany(ctx, cmds)
	}
	var pass []statemachine.Command
	var at []int // pass[k] is cmds[at[k]]
	for i := range cmds {
		if out[i].Result.Code == statemachine.CodeOK {
			pass, at = append(pass, cmds[i]), append(at, i)
		}
	}
	if len(pass) > 0 {
		for k, o := range s.c.SubmitMany(ctx, pass) {
			out[at[k]] = o
		}
	}
	return out
}

// precheck is Precheck for a removal the cluster could encode; one it
// could not, the cluster rejects for that first.
func (s *Submitter) precheck(ctx context.Context, cmd *statemachine.Command) statemachine.Result {
	if cmd.Kind != statemachine.CmdRemoveNode && cmd.Kind != statemachine.CmdRemoveNetwork {
		return statemachine.Result{}
	}
	if statemachine.CheckEncodable(cmd).Code != statemachine.CodeOK {
		return statemachine.Result{}
	}
	return Precheck(ctx, s.c, cmd)
}
