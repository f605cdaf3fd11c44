package agent

import (
	"fmt"

	sm "shoal/statemachine"
)

// Op is an executor operation: what Step asks an executor to do for a task.
type Op uint8

// Executor operations.
const (
	OpNone    Op = iota
	OpPrepare    // get ready to start (resolve the command, make the log files); answers ObsPrepared or ObsRejected
	OpStart      // start the process; answers ObsStarted or ObsRejected
	OpStop       // stop the process (SIGTERM, SIGKILL after the grace period); answers ObsExited
	OpAttach     // find the process a previous agent run started; answers ObsStarted or ObsLost
	OpForget     // release what the executor keeps for the task (log files, timers); no answer. Never returned by Step
	numOps
)

var opNames = [...]string{"none", "prepare", "start", "stop", "attach", "forget"}

func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// ObsKind is what an executor observed about a task.
type ObsKind uint8

// Observation kinds.
const (
	ObsNone     ObsKind = iota // nothing new: re-evaluate (the assignment changed)
	ObsPrepared                // OpPrepare succeeded
	ObsRejected                // the task cannot run (Message says why)
	ObsStarted                 // the process runs (started or re-attached); Handle identifies it
	ObsExited                  // the process ended with ExitCode
	ObsLost                    // the process ended while no agent watched it; exit code unknown
	numObsKinds
)

var obsNames = [...]string{"none", "prepared", "rejected", "started", "exited", "lost"}

func (k ObsKind) String() string {
	if k < numObsKinds {
		return obsNames[k]
	}
	return fmt.Sprintf("ObsKind(%d)", uint8(k))
}

// Observation is one executor report about one task.
type Observation struct {
	Kind     ObsKind
	ExitCode int32  // ObsExited
	Message  string // ObsRejected, ObsExited (e.g. "killed by signal 9"), ObsLost
	Handle   Handle // ObsStarted
}

// TaskView is what Step needs to know about a task.
type TaskView struct {
	State    sm.TaskState    // the agent's observed state
	Desired  sm.DesiredState // what the manager wants
	Op       Op              // the operation in flight, OpNone if none
	Attached bool            // this agent run holds the task's process (started or re-attached, not yet exited)
	Hold     bool            // prepare and start nothing: the agent restarted and has not heard from the manager yet
}

// Decision is Step's answer: the task's next observed state and the
// operation to issue.
type Decision struct {
	State    sm.TaskState // equal to TaskView.State when unchanged
	ExitCode int32
	Message  string
	Do       Op // OpNone: nothing to do
}

// MsgLost is the status message of a task whose process ended while no
// agent was watching it.
const MsgLost = "the process ended while the agent was not running; exit code unknown"

// Step is the task lifecycle every executor follows: from what the agent
// knows of a task and what its executor just observed, the next observed
// state and the next operation. It is pure. Its rules:
//
//   - states only move up; a terminal task stays terminal, and a process it
//     still holds is stopped;
//   - a task whose desired state is shutdown or remove is never prepared,
//     started or left running: before it started it goes to shutdown at once,
//     a running (or re-attached) process is stopped;
//   - a task held at desired ready is prepared but not started;
//   - while Hold is set nothing is prepared or started;
//   - an exit after a stop is shutdown; otherwise exit 0 is complete and any
//     other code failed; a task that cannot be prepared or started is rejected.
func Step(v TaskView, obs Observation) Decision {
	d := Decision{State: v.State}
	if v.State.Terminal() {
		// The state stays; a process still held is stopped (the manager
		// gave up on the task, or an attach answered after it ended).
		attached, op := v.Attached, v.Op
		switch obs.Kind {
		case ObsNone:
		case ObsStarted:
			attached, op = true, OpNone
		case ObsExited, ObsLost:
			attached, op = false, OpNone
		default:
			op = OpNone
		}
		if attached && op == OpNone {
			d.Do = OpStop
		}
		return d
	}
	op := v.Op
	switch obs.Kind {
	case ObsPrepared:
		op = OpNone
		if v.State < sm.StateReady {
			d.State = sm.StateReady
		}
	case ObsRejected:
		d.State, d.Message = sm.StateRejected, obs.Message
		return d
	case ObsStarted:
		op, v.Attached = OpNone, true
		d.State = sm.StateRunning
	case ObsExited:
		switch {
		case v.Op == OpStop || v.Desired.Stopping():
			d.State, d.ExitCode, d.Message = sm.StateShutdown, obs.ExitCode, obs.Message
		case obs.ExitCode == 0:
			d.State, d.Message = sm.StateComplete, obs.Message
		default:
			d.State, d.ExitCode, d.Message = sm.StateFailed, obs.ExitCode, obs.Message
		}
		return d
	case ObsLost:
		d.State, d.Message = sm.StateFailed, MsgLost
		if v.Desired.Stopping() {
			d.State = sm.StateShutdown
		}
		return d
	}
	d.Do = next(d.State, v.Desired, op, v.Attached)
	if v.Hold && (d.Do == OpPrepare || d.Do == OpStart) {
		d.Do = OpNone
	}
	switch d.Do {
	case OpPrepare:
		d.State = max(d.State, sm.StatePreparing)
	case OpStart:
		d.State = max(d.State, sm.StateStarting)
	}
	if v.Desired.Stopping() && d.State < sm.StateStarting && (op == OpNone || op == OpPrepare) {
		d.State = sm.StateShutdown // stopped before it ran
	}
	return d
}

// next is the operation a task at state s needs, given the operation in
// flight.
func next(s sm.TaskState, desired sm.DesiredState, inFlight Op, attached bool) Op {
	switch inFlight {
	case OpNone:
	case OpPrepare:
		return OpNone // a stopping task is marked shutdown by Step; the late answer is ignored
	default:
		return OpNone // wait for the start, stop or attach to answer
	}
	if s >= sm.StateStarting && !attached {
		return OpAttach // a process an earlier agent run may have left
	}
	if desired.Stopping() {
		if s >= sm.StateStarting {
			return OpStop
		}
		return OpNone
	}
	switch {
	case s < sm.StateReady:
		return OpPrepare
	case s == sm.StateReady && desired == sm.DesiredRunning:
		return OpStart
	}
	return OpNone
}
