package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sm "shoal/statemachine"
	"shoal/wire"
)

// Tests of the process executor with real short processes. They wait for
// events with a deadline, never a fixed sleep.

const waitLimit = 10 * time.Second

func newProcExec(t *testing.T, dir string) *ProcessExecutor {
	t.Helper()
	e, err := NewProcessExecutor(ProcessConfig{DataDir: dir, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func run(id sm.TaskID, grace time.Duration, argv ...string) *TaskRun {
	return &TaskRun{Task: id, Service: "svc", Slot: 2,
		Addresses: []wire.Address{{Network: "front", Addr: "10.0.0.5/24"}},
		Spec:      &wire.Spec{Service: "svc", Version: 1, Command: argv, Env: []string{"FOO=bar"}, StopGrace: int64(grace)}}
}

func nextEvent(t *testing.T, e Executor) Event {
	t.Helper()
	select {
	case ev := <-e.Events():
		return ev
	case <-time.After(waitLimit):
		t.Fatalf("no executor event within %v", waitLimit)
		return Event{}
	}
}

func expectObs(t *testing.T, e Executor, id sm.TaskID, kind ObsKind) Observation {
	t.Helper()
	ev := nextEvent(t, e)
	if ev.Task != id || ev.Obs.Kind != kind {
		t.Fatalf("event %+v, want %v for task %d", ev, kind, id)
	}
	return ev.Obs
}

// startTask prepares and starts r, returning its handle; the process group
// is killed when the test ends.
func startTask(t *testing.T, e *ProcessExecutor, r *TaskRun) Handle {
	t.Helper()
	e.Do(Action{Op: OpPrepare, Task: r.Task, Run: r})
	expectObs(t, e, r.Task, ObsPrepared)
	e.Do(Action{Op: OpStart, Task: r.Task, Run: r})
	obs := expectObs(t, e, r.Task, ObsStarted)
	if obs.Handle.Pid <= 0 || obs.Handle.StartTime == 0 {
		t.Fatalf("handle %+v", obs.Handle)
	}
	t.Cleanup(func() { _ = killGroup(obs.Handle.Pid, syscall.SIGKILL) })
	return obs.Handle
}

// waitGone waits until h no longer names a live process.
func waitGone(t *testing.T, h Handle) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for alive("/proc", h) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive after %v", h.Pid, waitLimit)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}

func TestProcessExitCodes(t *testing.T) {
	e := newProcExec(t, t.TempDir())
	startTask(t, e, run(1, 0, "sh", "-c", "exit 3"))
	if obs := expectObs(t, e, 1, ObsExited); obs.ExitCode != 3 {
		t.Fatalf("exit %+v, want code 3", obs)
	}
	startTask(t, e, run(2, 0, "true"))
	if obs := expectObs(t, e, 2, ObsExited); obs.ExitCode != 0 {
		t.Fatalf("exit %+v, want 0", obs)
	}
}

func TestProcessCannotStart(t *testing.T) {
	e := newProcExec(t, t.TempDir())
	e.Do(Action{Op: OpPrepare, Task: 1, Run: run(1, 0, "no-such-command-shoal")})
	if obs := expectObs(t, e, 1, ObsRejected); !strings.Contains(obs.Message, "not found") {
		t.Fatalf("message %q", obs.Message)
	}
	e.Do(Action{Op: OpPrepare, Task: 2, Run: run(2, 0, "./missing")})
	expectObs(t, e, 2, ObsRejected)
	e.Do(Action{Op: OpPrepare, Task: 3, Run: run(3, 0)})
	if obs := expectObs(t, e, 3, ObsRejected); !strings.Contains(obs.Message, "no command") {
		t.Fatalf("message %q", obs.Message)
	}
}

func TestProcessEnvironmentAndLogs(t *testing.T) {
	dir := t.TempDir()
	e := newProcExec(t, dir)
	startTask(t, e, run(7, 0, "sh", "-c", `echo "$SHOAL_TASK_ID $SHOAL_SERVICE $SHOAL_SLOT $SHOAL_ADDRESSES $FOO"; echo oops >&2`))
	expectObs(t, e, 7, ObsExited)
	out, _ := os.ReadFile(filepath.Join(dir, "logs", "7", "stdout"))
	errOut, _ := os.ReadFile(filepath.Join(dir, "logs", "7", "stderr"))
	if string(out) != "7 svc 2 front=10.0.0.5/24 bar\n" || string(errOut) != "oops\n" {
		t.Fatalf("stdout %q stderr %q", out, errOut)
	}
	e.Do(Action{Op: OpForget, Task: 7})
	if _, err := os.Stat(filepath.Join(dir, "logs", "7")); !os.IsNotExist(err) {
		t.Fatal("forget left the logs")
	}
}

// waitFile waits until the file at path holds want.
func waitFile(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %q", path, want)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}

func TestProcessStop(t *testing.T) {
	dir := t.TempDir()
	e := newProcExec(t, dir)
	h := startTask(t, e, run(1, 0, "sleep", "1000"))
	e.Do(Action{Op: OpStop, Task: 1, Grace: time.Minute})
	if obs := expectObs(t, e, 1, ObsExited); obs.ExitCode != 128+int32(syscall.SIGTERM) {
		t.Fatalf("exit %+v, want SIGTERM", obs)
	}
	waitGone(t, h)

	// A process that ignores SIGTERM is killed after the grace period, with
	// every process of its group.
	h = startTask(t, e, run(2, 0, "sh", "-c", `trap "" TERM; echo ready; sleep 1000 & sleep 1000`))
	waitFile(t, filepath.Join(dir, "logs", "2", "stdout"), "ready")
	e.Do(Action{Op: OpStop, Task: 2, Grace: 100 * time.Millisecond})
	if obs := expectObs(t, e, 2, ObsExited); obs.ExitCode != 128+int32(syscall.SIGKILL) {
		t.Fatalf("exit %+v, want SIGKILL", obs)
	}
	waitGroupGone(t, h.Pid)
}

// waitGroupGone waits until no process is left in the group (members just
// killed may linger as zombies for a moment).
func waitGroupGone(t *testing.T, pgid int32) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for syscall.Kill(-int(pgid), 0) != syscall.ESRCH {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still has members after %v", pgid, waitLimit)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}

func TestProcessReattachAfterRestart(t *testing.T) {
	dir := t.TempDir()
	first := newProcExec(t, dir)
	h1 := startTask(t, first, run(1, 0, "sleep", "1000"))
	h2 := startTask(t, first, run(2, 0, "sleep", "1000"))
	h3 := startTask(t, first, run(3, 0, "sleep", "1000"))
	h4 := startTask(t, first, run(4, 0, "sleep", "1000"))
	first.Close() // the agent dies; its processes run on

	second := newProcExec(t, dir)
	second.Do(Action{Op: OpAttach, Task: 1, Handle: h1})
	if obs := expectObs(t, second, 1, ObsStarted); obs.Handle != h1 {
		t.Fatalf("attached to %+v, want %+v", obs.Handle, h1)
	}
	// Task 2's persisted identity names another process (the pid was reused):
	// not its process.
	second.Do(Action{Op: OpAttach, Task: 2, Handle: Handle{Pid: h2.Pid, StartTime: h2.StartTime + 1}})
	expectObs(t, second, 2, ObsLost)
	// Task 4's identity was never persisted: its marked process is adopted.
	second.Do(Action{Op: OpAttach, Task: 4})
	if obs := expectObs(t, second, 4, ObsStarted); obs.Handle != h4 {
		t.Fatalf("adopted %+v, want %+v", obs.Handle, h4)
	}
	// Task 3 is not held any more: Sweep kills it, and 2's stray process too.
	second.Sweep()
	waitGone(t, h3)
	waitGone(t, h2)
	if !alive("/proc", h1) || !alive("/proc", h4) {
		t.Fatal("Sweep killed an attached process")
	}
	// A re-attached process is not our child: its exit is noticed by polling.
	// (Here the test process is its parent, so its status may be reaped; a
	// restarted agent is a new process and reads "exit code unknown".)
	_ = killGroup(h1.Pid, syscall.SIGKILL)
	if obs := expectObs(t, second, 1, ObsExited); obs.Message != MsgExitUnknown && obs.ExitCode != 128+int32(syscall.SIGKILL) {
		t.Fatalf("exit %+v", obs)
	}
	// Stopping a re-attached process works the same way.
	second.Do(Action{Op: OpStop, Task: 4, Grace: time.Minute})
	expectObs(t, second, 4, ObsExited)
	waitGone(t, h4)
}

func TestCapFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "stdout")
	data := bytes.Repeat([]byte("0123456789"), 100)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := capFile(p, 2000); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Size() != 1000 {
		t.Fatal("a small file was rotated")
	}
	if err := capFile(p, 300); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(p + ".1")
	fi, _ := os.Stat(p)
	if fi.Size() != 0 || !bytes.Equal(old, data[700:]) {
		t.Fatalf("after capping: file %d bytes, .1 holds %d bytes", fi.Size(), len(old))
	}
}
