package agent

import (
	"cmp"
	"slices"
	"syscall"

	sm "shoal/statemachine"
)

// Re-attaching after an agent restart, killing strangers, and watching
// processes that are not this run's children.

// MsgExitUnknown is the message of an exit the agent could not read the code
// of: the process was started by an earlier agent run.
const MsgExitUnknown = "the process was started by an earlier agent run; exit code unknown"

// scanLocked scans /proc once for processes carrying this agent's marker.
func (e *ProcessExecutor) scanLocked() {
	if e.mu.found != nil {
		return
	}
	e.mu.found = map[sm.TaskID][]Handle{}
	procs, err := scanTasks(e.cfg.ProcRoot, e.dir)
	if err != nil {
		e.cfg.Logger.Error("agent: cannot look for processes of an earlier run", "err", err)
		return
	}
	for _, p := range procs {
		e.mu.found[p.task] = append(e.mu.found[p.task], p.handle)
	}
	for _, hs := range e.mu.found {
		slices.SortFunc(hs, func(a, b Handle) int { return cmp.Compare(a.StartTime, b.StartTime) })
	}
}

// attachLocked claims the task's process: the one with the persisted pid
// and start time, or, when none was persisted (the agent died between fork
// and write), the oldest process marked with the task. Anything else is a
// different process.
func (e *ProcessExecutor) attachLocked(id sm.TaskID, h Handle) {
	if p := e.mu.procs[id]; p != nil { // already ours in this run
		e.q.push(Event{id, Observation{Kind: ObsStarted, Handle: p.handle}})
		return
	}
	e.scanLocked()
	var got Handle
	for _, c := range e.mu.found[id] {
		if !e.mu.claimed[c] && (h.IsZero() || c == h) {
			got = c
			break
		}
	}
	if got.IsZero() && !h.IsZero() && !e.mu.claimed[h] && alive(e.cfg.ProcRoot, h) {
		got = h // same pid and start time, marker unreadable
	}
	if got.IsZero() {
		e.q.push(Event{id, Observation{Kind: ObsLost}})
		return
	}
	e.mu.claimed[got] = true
	e.mu.procs[id] = &proc{handle: got, logs: logDir(e.dir, id)}
	e.q.push(Event{id, Observation{Kind: ObsStarted, Handle: got}})
}

// Sweep kills (SIGKILL, whole group) every process marked with this agent's
// data directory that no OpAttach claimed: tasks the agent no longer holds,
// or duplicates.
func (e *ProcessExecutor) Sweep() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.scanLocked()
	for id, hs := range e.mu.found {
		for _, h := range hs {
			if e.mu.claimed[h] {
				continue
			}
			e.cfg.Logger.Warn("agent: killing a process of an earlier run that no task holds", "task", id, "pid", h.Pid)
			_ = killGroup(h.Pid, syscall.SIGKILL)
		}
	}
}

// housekeep polls re-attached processes for exit and caps log files, every
// PollInterval.
func (e *ProcessExecutor) housekeep() {
	for {
		select {
		case <-e.stop:
			return
		case <-e.cfg.Clock.After(e.cfg.PollInterval):
		}
		e.pollOnce()
	}
}

func (e *ProcessExecutor) pollOnce() {
	type item struct {
		id sm.TaskID
		p  *proc
	}
	e.mu.Lock()
	items := make([]item, 0, len(e.mu.procs))
	for id, p := range e.mu.procs {
		items = append(items, item{id, p})
	}
	e.mu.Unlock()
	for _, it := range items {
		if err := capLogs(it.p.logs, e.cfg.LogLimit); err != nil {
			e.cfg.Logger.Warn("agent: cap task logs", "task", it.id, "err", err)
		}
		if it.p.child || alive(e.cfg.ProcRoot, it.p.handle) {
			continue
		}
		obs := Observation{Kind: ObsExited, ExitCode: -1, Message: MsgExitUnknown}
		// A zombie is ours to reap when the agent is the reaper (PID 1 or a
		// subreaper); then its status is known.
		var ws syscall.WaitStatus
		if pid, err := syscall.Wait4(int(it.p.handle.Pid), &ws, syscall.WNOHANG, nil); err == nil && pid > 0 {
			obs = Observation{Kind: ObsExited, ExitCode: int32(ws.ExitStatus())}
			if ws.Signaled() {
				obs.ExitCode, obs.Message = 128+int32(ws.Signal()), "killed by signal "+ws.Signal().String()
			}
		}
		e.exited(it.id, it.p, obs)
	}
}
