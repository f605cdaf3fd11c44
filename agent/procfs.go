package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"shoal/internal/procstat"
	sm "shoal/statemachine"
)

// What the process executor reads from /proc: a process's start time (to
// tell a pid's current process from a reused pid), its state and process
// group (shoal/internal/procstat), and the environment markers that name
// the task and the agent.

// Environment markers set on every task process.
const (
	envTaskID   = "SHOAL_TASK_ID"
	envAgentDir = "SHOAL_AGENT_DIR" // the data directory of the agent that started it
)

// foundProc is a process group leader some agent started for a task.
type foundProc struct {
	task   sm.TaskID
	handle Handle
}

// scanTasks finds the process group leaders under root whose environment
// carries this agent's marker (dir), with the task each runs. Processes it
// may not read are skipped.
func scanTasks(root, dir string) ([]foundProc, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("agent: list processes: %w", err)
	}
	self := int32(os.Getpid())
	var out []foundProc
	for _, e := range ents {
		pid64, err := strconv.ParseInt(e.Name(), 10, 32)
		if err != nil || int32(pid64) == self {
			continue
		}
		pid := int32(pid64)
		st, err := procstat.Read(root, int(pid))
		if err != nil || st.Pgrp != pid || st.State == 'Z' {
			continue
		}
		env, err := os.ReadFile(filepath.Join(root, e.Name(), "environ"))
		if err != nil {
			continue
		}
		var task uint64
		var mine, hasTask bool
		for _, kv := range bytes.Split(env, []byte{0}) {
			k, v, _ := bytes.Cut(kv, []byte{'='})
			switch string(k) {
			case envAgentDir:
				mine = string(v) == dir
			case envTaskID:
				task, err = strconv.ParseUint(string(v), 10, 64)
				hasTask = err == nil
			}
		}
		if mine && hasTask {
			out = append(out, foundProc{task: sm.TaskID(task), handle: Handle{Pid: pid, StartTime: st.StartTime}})
		}
	}
	return out, nil
}

// alive reports whether h still names a running (not zombie) process.
func alive(root string, h Handle) bool {
	st, err := procstat.Read(root, int(h.Pid))
	return err == nil && st.StartTime == h.StartTime && st.State != 'Z'
}

// killGroup sends sig to the process group led by pid; a group already gone
// is not an error.
func killGroup(pid int32, sig syscall.Signal) error {
	if pid <= 1 {
		return fmt.Errorf("agent: refusing to signal process group %d", pid)
	}
	if err := syscall.Kill(-int(pid), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
