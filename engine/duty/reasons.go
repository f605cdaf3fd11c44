package duty

import (
	"errors"
	"slices"

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
// whatever its size, and at most one per DriverConfig.ReasonRefresh (a task
// that carries no reason yet gets one at once).

// maxListedTasks is the most tasks a reason command names one by one (a few
// new tasks joined a batch that already carries its reason); beyond it the
// command covers every pending task of the batch, which costs the group one
// pass over the service's slots instead of a long list in the Raft log.
const maxListedTasks = 64

// reasonCommands returns the commands that set the message of every task
// the plan leaves pending to why it stays pending, where it says otherwise.
// A task that carries no message yet gets one at once; tasks that carry an
// outdated one are updated only if refresh allows it for their batch (it is
// asked only then); held reports that some were left outdated for now.
func (p *plan) reasonCommands(batches []*batch, refresh func(batchKey) bool) (cmds []statemachine.Command, held bool) {
	for _, b := range batches {
		err := p.why[b.batchKey]
		if err == nil {
			continue
		}
		var stale []staleTask
		outdated := false
		batchMsg := pendingMessage(err)
		for i, id := range b.tasks {
			msg := batchMsg
			if b.global {
				terr := p.taskWhy[id]
				if terr == nil {
					continue
				}
				msg = pendingMessage(terr)
			} else if i < p.placed[b.batchKey] {
				continue // the plan assigns a batch's first tasks: they are on their way
			}
			if b.msgs[i] != msg {
				stale = append(stale, staleTask{id: id, msg: msg, outdated: b.msgs[i] != ""})
				outdated = outdated || b.msgs[i] != ""
			}
		}
		if outdated && !refresh(b.batchKey) {
			held = true
			stale = slices.DeleteFunc(stale, func(st staleTask) bool { return st.outdated })
		}
		cmds = append(cmds, batchReasons(b, stale)...)
	}
	return cmds, held
}

// staleTask is a task whose message is not the reason it stays pending.
type staleTask struct {
	id       statemachine.TaskID
	msg      string
	outdated bool // it carries another reason (else none)
}

// batchReasons groups a batch's stale tasks by message, one command per
// message (in message order): a replicated batch's many tasks as the whole
// batch, else listed, a global batch's at most 4*maxListedTasks a command.
func batchReasons(b *batch, stale []staleTask) []statemachine.Command {
	byMsg := map[string][]statemachine.TaskID{}
	for _, st := range stale {
		byMsg[st.msg] = append(byMsg[st.msg], st.id)
	}
	msgs := make([]string, 0, len(byMsg))
	for m := range byMsg {
		msgs = append(msgs, m)
	}
	slices.Sort(msgs)
	var cmds []statemachine.Command
	for _, m := range msgs {
		ids := byMsg[m]
		if !b.global && len(ids) > maxListedTasks {
			cmds = append(cmds, reasonCommand(b, m, nil)) // every pending task of the batch
			continue
		}
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
	if errors.Is(err, sched.ErrInvalidConstraint) {
		return "its constraints cannot be used (update the service): " + err.Error()
	}
	return err.Error()
}
