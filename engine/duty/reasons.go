package duty

import (
	"errors"
	"slices"
	"strings"

	"shoal/sched"
	"shoal/statemachine"
)

// Pending reasons: a task the plan leaves pending carries why, in the
// replicated state (statemachine.CmdPendingReason), so every manager's API
// shows it. The reasons are a third pure stage: (batches as scanned, with
// the message each task carries; the plan) → the CmdPendingReason commands
// that bring the messages up to date. A message that is already current is
// not proposed again, so a pass over 100k tasks that stay pending for the
// same reason proposes nothing; a batch whose reason changed is one command,
// whatever its size.

// maxListedTasks is the most tasks a reason command names one by one (a few
// new tasks joined a batch that already carries its reason); beyond it the
// command covers every pending task of the batch, which costs the group one
// pass over the service's slots instead of a long list in the Raft log.
const maxListedTasks = 64

// reasonCommands returns the commands that set the message of every task
// the plan leaves pending to why it stays pending, where it says otherwise.
func (p *plan) reasonCommands(batches []*batch) []statemachine.Command {
	var cmds []statemachine.Command
	for _, b := range batches {
		err := p.why[b.batchKey]
		if err == nil {
			continue
		}
		if b.global {
			cmds = append(cmds, p.globalReasons(b)...)
			continue
		}
		// The plan assigns a batch's tasks in order: the first placed
		// ones are on their way to a node.
		msg := pendingMessage(err)
		var stale []statemachine.TaskID
		for i := p.placed[b.batchKey]; i < len(b.tasks); i++ {
			if b.msgs[i] != msg {
				stale = append(stale, b.tasks[i])
			}
		}
		if len(stale) > maxListedTasks {
			stale = nil // every pending task of the batch
		} else if len(stale) == 0 {
			continue
		}
		cmds = append(cmds, reasonCommand(b, msg, stale))
	}
	return cmds
}

// globalReasons: each task of a global service is bound to its node, so
// each has its own reason; tasks with the same one share a command.
func (p *plan) globalReasons(b *batch) []statemachine.Command {
	byMsg := map[string][]statemachine.TaskID{}
	for i, id := range b.tasks {
		err := p.taskWhy[id]
		if err == nil {
			continue
		}
		if msg := pendingMessage(err); b.msgs[i] != msg {
			byMsg[msg] = append(byMsg[msg], id)
		}
	}
	msgs := make([]string, 0, len(byMsg))
	for m := range byMsg {
		msgs = append(msgs, m)
	}
	slices.Sort(msgs)
	var cmds []statemachine.Command
	for _, m := range msgs {
		ids := byMsg[m]
		for len(ids) > 0 {
			n := min(len(ids), 4*maxListedTasks)
			cmds = append(cmds, reasonCommand(b, m, ids[:n]))
			ids = ids[n:]
		}
	}
	return cmds
}

func reasonCommand(b *batch, msg string, tasks []statemachine.TaskID) statemachine.Command {
	return statemachine.Command{Kind: statemachine.CmdPendingReason, Name: b.name,
		Seq: uint64(b.version), Message: msg, Tasks: tasks}
}

// pendingMessage is what a user reads beside a pending task: which
// constraint matched no node, which resource was short on how many nodes.
func pendingMessage(err error) string {
	var ue *sched.UnplacedError
	if errors.As(err, &ue) {
		return "no suitable node: " + ue.Why.String()
	}
	var ne *sched.NodeError
	if errors.As(err, &ne) {
		return "its node cannot run it: " + ne.Detail
	}
	msg := err.Error()
	if errors.Is(err, sched.ErrInvalidConstraint) {
		return "its constraints cannot be used (update the service): " + strings.TrimPrefix(msg, "sched: ")
	}
	return strings.TrimPrefix(msg, "sched: ")
}
