package agent

import (
	"testing"

	sm "shoal/statemachine"
)

func TestStep(t *testing.T) {
	const (
		run  = sm.DesiredRunning
		rdy  = sm.DesiredReady
		shut = sm.DesiredShutdown
		rm   = sm.DesiredRemove
	)
	none := Observation{}
	for _, c := range []struct {
		name string
		v    TaskView
		obs  Observation
		want Decision
	}{
		{"new task is prepared", TaskView{State: sm.StateAssigned, Desired: run}, none,
			Decision{State: sm.StatePreparing, Do: OpPrepare}},
		{"prepared task is started", TaskView{State: sm.StatePreparing, Desired: run, Op: OpPrepare}, Observation{Kind: ObsPrepared},
			Decision{State: sm.StateStarting, Do: OpStart}},
		{"held at ready: prepared, not started", TaskView{State: sm.StatePreparing, Desired: rdy, Op: OpPrepare}, Observation{Kind: ObsPrepared},
			Decision{State: sm.StateReady}},
		{"ready promoted to running starts", TaskView{State: sm.StateReady, Desired: run}, none,
			Decision{State: sm.StateStarting, Do: OpStart}},
		{"started runs", TaskView{State: sm.StateStarting, Desired: run, Op: OpStart}, Observation{Kind: ObsStarted, Handle: Handle{Pid: 7}},
			Decision{State: sm.StateRunning}},
		{"running steady", TaskView{State: sm.StateRunning, Desired: run, Attached: true}, none,
			Decision{State: sm.StateRunning}},
		{"operation in flight: wait", TaskView{State: sm.StateStarting, Desired: run, Op: OpStart}, none,
			Decision{State: sm.StateStarting}},
		{"exit 0 completes", TaskView{State: sm.StateRunning, Desired: run, Attached: true}, Observation{Kind: ObsExited},
			Decision{State: sm.StateComplete}},
		{"exit 3 fails", TaskView{State: sm.StateRunning, Desired: run, Attached: true}, Observation{Kind: ObsExited, ExitCode: 3},
			Decision{State: sm.StateFailed, ExitCode: 3}},
		{"cannot start: rejected", TaskView{State: sm.StateStarting, Desired: run, Op: OpStart}, Observation{Kind: ObsRejected, Message: "no such file"},
			Decision{State: sm.StateRejected, Message: "no such file"}},
		{"shutdown before it ran", TaskView{State: sm.StateAssigned, Desired: shut}, none,
			Decision{State: sm.StateShutdown}},
		{"remove while preparing: shutdown, late answer ignored", TaskView{State: sm.StatePreparing, Desired: rm, Op: OpPrepare}, none,
			Decision{State: sm.StateShutdown}},
		{"prepared after shutdown: nothing", TaskView{State: sm.StateShutdown, Desired: rm}, Observation{Kind: ObsPrepared},
			Decision{State: sm.StateShutdown}},
		{"stopping while starting: wait for the start", TaskView{State: sm.StateStarting, Desired: shut, Op: OpStart}, none,
			Decision{State: sm.StateStarting}},
		{"started after shutdown was asked: stop", TaskView{State: sm.StateStarting, Desired: shut, Op: OpStart}, Observation{Kind: ObsStarted},
			Decision{State: sm.StateRunning, Do: OpStop}},
		{"running asked to stop", TaskView{State: sm.StateRunning, Desired: shut, Attached: true}, none,
			Decision{State: sm.StateRunning, Do: OpStop}},
		{"exit after stop is shutdown", TaskView{State: sm.StateRunning, Desired: shut, Op: OpStop, Attached: true}, Observation{Kind: ObsExited, ExitCode: 143},
			Decision{State: sm.StateShutdown, ExitCode: 143}},
		{"restart: running task is attached first", TaskView{State: sm.StateRunning, Desired: run}, none,
			Decision{State: sm.StateRunning, Do: OpAttach}},
		{"restart: task to stop is attached, then stopped", TaskView{State: sm.StateRunning, Desired: rm}, none,
			Decision{State: sm.StateRunning, Do: OpAttach}},
		{"re-attached", TaskView{State: sm.StateRunning, Desired: run, Op: OpAttach}, Observation{Kind: ObsStarted},
			Decision{State: sm.StateRunning}},
		{"ended while the agent was down", TaskView{State: sm.StateRunning, Desired: run, Op: OpAttach}, Observation{Kind: ObsLost},
			Decision{State: sm.StateFailed, Message: MsgLost}},
		{"ended while down, was to stop anyway", TaskView{State: sm.StateRunning, Desired: shut, Op: OpAttach}, Observation{Kind: ObsLost},
			Decision{State: sm.StateShutdown, Message: MsgLost}},
		{"hold: nothing prepared", TaskView{State: sm.StateAssigned, Desired: run, Hold: true}, none,
			Decision{State: sm.StateAssigned}},
		{"hold: nothing started", TaskView{State: sm.StatePreparing, Desired: run, Op: OpPrepare, Hold: true}, Observation{Kind: ObsPrepared},
			Decision{State: sm.StateReady}},
		{"hold: still attaches", TaskView{State: sm.StateRunning, Desired: run, Hold: true}, none,
			Decision{State: sm.StateRunning, Do: OpAttach}},
		{"terminal stays", TaskView{State: sm.StateFailed, Desired: run}, Observation{Kind: ObsPrepared},
			Decision{State: sm.StateFailed}},
		{"terminal with a process: stopped", TaskView{State: sm.StateOrphaned, Desired: shut, Attached: true}, none,
			Decision{State: sm.StateOrphaned, Do: OpStop}},
		{"terminal, attach answers: stopped", TaskView{State: sm.StateOrphaned, Desired: run, Op: OpAttach}, Observation{Kind: ObsStarted},
			Decision{State: sm.StateOrphaned, Do: OpStop}},
		{"terminal, stop in flight: wait", TaskView{State: sm.StateOrphaned, Desired: shut, Attached: true, Op: OpStop}, none,
			Decision{State: sm.StateOrphaned}},
	} {
		if got := Step(c.v, c.obs); got != c.want {
			t.Errorf("%s: Step(%+v, %v) = %+v, want %+v", c.name, c.v, c.obs.Kind, got, c.want)
		}
	}
}
