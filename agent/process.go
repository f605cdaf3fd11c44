package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"shoal/internal/clock"
	"shoal/internal/procstat"
	sm "shoal/statemachine"
)

// ProcessConfig configures the process executor.
type ProcessConfig struct {
	// DataDir is the agent's data directory (required): task logs go under
	// DataDir/logs, and every task process carries it as a marker, so a
	// restarted agent finds its processes.
	DataDir string
	// LogLimit is the size in bytes past which a task's stdout or stderr
	// file is rotated (one older file is kept); default 8 MiB.
	LogLimit int64
	// PollInterval is how often re-attached processes (children of an
	// earlier agent run) are checked for exit, and log sizes checked;
	// default 1s.
	PollInterval time.Duration
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// ProcRoot is where /proc is mounted; default "/proc" (tests only).
	ProcRoot string
}

// ProcessExecutor runs tasks as local processes: each in its own process
// group, its output in size-capped files, stopped with SIGTERM to the group
// and SIGKILL after the grace period. Processes survive an agent restart;
// the next agent re-attaches to them by pid and start time.
type ProcessExecutor struct {
	cfg  ProcessConfig
	dir  string // absolute DataDir: the marker
	q    *eventQueue
	stop chan struct{}
	once sync.Once
	mu   struct {
		sync.Mutex
		prepared map[sm.TaskID]string // resolved command path
		procs    map[sm.TaskID]*proc
		found    map[sm.TaskID][]Handle // the start-up scan; nil before it ran
		claimed  map[Handle]bool
	}
}

// proc is one running task process.
type proc struct {
	handle   Handle
	child    bool // started by this run (we wait for it); false: re-attached, polled
	stopping bool
	kill     clock.Timer // SIGKILL after the grace period
	logs     string      // log directory
}

// NewProcessExecutor returns a process executor; its housekeeping goroutine
// runs until Close.
func NewProcessExecutor(cfg ProcessConfig) (*ProcessExecutor, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("agent: the process executor needs a data directory")
	}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("agent: data directory: %w", err)
	}
	if cfg.LogLimit <= 0 {
		cfg.LogLimit = 8 << 20
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	e := &ProcessExecutor{cfg: cfg, dir: dir, q: newEventQueue(), stop: make(chan struct{})}
	e.mu.prepared = map[sm.TaskID]string{}
	e.mu.procs = map[sm.TaskID]*proc{}
	e.mu.claimed = map[Handle]bool{}
	go e.housekeep()
	return e, nil
}

// Events delivers observations.
func (e *ProcessExecutor) Events() <-chan Event { return e.q.out }

// Close stops the executor's goroutines; task processes keep running.
func (e *ProcessExecutor) Close() error {
	e.once.Do(func() {
		close(e.stop)
		e.q.close()
	})
	return nil
}

// Do performs a. Prepare, Attach and Forget finish before Do returns (they
// only touch files and /proc); Start forks; Stop signals. Outcomes arrive
// on Events.
func (e *ProcessExecutor) Do(a Action) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch a.Op {
	case OpPrepare:
		path, err := e.prepare(a.Run)
		if err != nil {
			e.q.push(Event{a.Task, Observation{Kind: ObsRejected, Message: err.Error()}})
			return
		}
		e.mu.prepared[a.Task] = path
		e.q.push(Event{a.Task, Observation{Kind: ObsPrepared}})
	case OpStart:
		e.startLocked(a.Run)
	case OpStop:
		e.stopLocked(a.Task, a.Grace)
	case OpAttach:
		e.attachLocked(a.Task, a.Handle)
	case OpForget:
		delete(e.mu.prepared, a.Task)
		if p := e.mu.procs[a.Task]; p != nil {
			e.cfg.Logger.Warn("agent: forgetting a task whose process runs; killing it", "task", a.Task, "pid", p.handle.Pid)
			_ = killGroup(p.handle.Pid, syscall.SIGKILL)
			delete(e.mu.procs, a.Task)
		}
		if err := os.RemoveAll(logDir(e.dir, a.Task)); err != nil {
			e.cfg.Logger.Warn("agent: remove task logs", "task", a.Task, "err", err)
		}
	}
}

// prepare resolves the command and creates the log files.
func (e *ProcessExecutor) prepare(r *TaskRun) (string, error) {
	sp := r.Spec
	if len(sp.Command) == 0 || sp.Command[0] == "" {
		return "", fmt.Errorf("agent: service %q has no command to run", r.Service)
	}
	name := sp.Command[0]
	var path string
	if strings.Contains(name, "/") {
		path = name
		if !filepath.IsAbs(path) && sp.Dir != "" {
			path = filepath.Join(sp.Dir, path)
		}
		fi, err := os.Stat(path)
		switch {
		case err != nil:
			return "", fmt.Errorf("agent: command %q: %w", name, err)
		case fi.IsDir() || fi.Mode()&0o111 == 0:
			return "", fmt.Errorf("agent: command %q is not an executable file", name)
		}
	} else {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("agent: command %q not found in PATH", name)
		}
		path = p
	}
	if sp.Dir != "" {
		if fi, err := os.Stat(sp.Dir); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("agent: working directory %q does not exist", sp.Dir)
		}
	}
	stdout, stderr, err := openLogs(logDir(e.dir, r.Task))
	if err != nil {
		return "", err
	}
	stdout.Close()
	stderr.Close()
	return path, nil
}

// taskEnv is the environment of a task process: the agent's own (without
// SHOAL_ variables), the spec's, then Shoal's.
func (e *ProcessExecutor) taskEnv(r *TaskRun) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHOAL_") {
			env = append(env, kv)
		}
	}
	env = append(env, r.Spec.Env...)
	addrs := make([]string, len(r.Addresses))
	for i, a := range r.Addresses {
		addrs[i] = a.Network + "=" + a.Addr
	}
	return append(env,
		envTaskID+"="+strconv.FormatUint(uint64(r.Task), 10),
		"SHOAL_SERVICE="+r.Service,
		"SHOAL_SLOT="+strconv.FormatUint(uint64(r.Slot), 10),
		"SHOAL_ADDRESSES="+strings.Join(addrs, ","),
		envAgentDir+"="+e.dir)
}

func (e *ProcessExecutor) startLocked(r *TaskRun) {
	id := r.Task
	path, ok := e.mu.prepared[id]
	if !ok {
		var err error
		if path, err = e.prepare(r); err != nil {
			e.q.push(Event{id, Observation{Kind: ObsRejected, Message: err.Error()}})
			return
		}
	}
	dir := logDir(e.dir, id)
	stdout, stderr, err := openLogs(dir)
	if err != nil {
		e.q.push(Event{id, Observation{Kind: ObsRejected, Message: err.Error()}})
		return
	}
	defer stdout.Close()
	defer stderr.Close()
	cmd := &exec.Cmd{Path: path, Args: r.Spec.Command, Dir: r.Spec.Dir, Env: e.taskEnv(r),
		Stdout: stdout, Stderr: stderr, SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	if err := cmd.Start(); err != nil {
		e.q.push(Event{id, Observation{Kind: ObsRejected, Message: fmt.Sprintf("agent: start %q: %v", r.Spec.Command[0], err)}})
		return
	}
	pid := int32(cmd.Process.Pid)
	st, err := procstat.Read(e.cfg.ProcRoot, int(pid)) // our unreaped child: its entry is there
	if err != nil {
		e.cfg.Logger.Warn("agent: read the start time of a new process", "task", id, "pid", pid, "err", err)
	}
	p := &proc{handle: Handle{Pid: pid, StartTime: st.StartTime}, child: true, logs: dir}
	e.mu.procs[id] = p
	delete(e.mu.prepared, id)
	e.q.push(Event{id, Observation{Kind: ObsStarted, Handle: p.handle}})
	go e.wait(id, p, cmd)
}

// wait reaps a child and reports its exit.
func (e *ProcessExecutor) wait(id sm.TaskID, p *proc, cmd *exec.Cmd) {
	err := cmd.Wait()
	obs := Observation{Kind: ObsExited}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		ws, _ := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			obs.ExitCode = 128 + int32(ws.Signal())
			obs.Message = "killed by signal " + ws.Signal().String()
		} else {
			obs.ExitCode = int32(ws.ExitStatus())
		}
	default:
		obs.ExitCode, obs.Message = -1, "agent: wait: "+err.Error()
	}
	e.exited(id, p, obs)
}

// exited records the end of p and reports it, once.
func (e *ProcessExecutor) exited(id sm.TaskID, p *proc, obs Observation) {
	_ = killGroup(p.handle.Pid, syscall.SIGKILL) // what the task left behind in its group
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.procs[id] != p {
		return
	}
	if p.kill != nil {
		p.kill.Stop()
	}
	delete(e.mu.procs, id)
	e.q.push(Event{id, obs})
}

func (e *ProcessExecutor) stopLocked(id sm.TaskID, grace time.Duration) {
	p := e.mu.procs[id]
	if p == nil || p.stopping {
		return
	}
	p.stopping = true
	if err := killGroup(p.handle.Pid, syscall.SIGTERM); err != nil {
		e.cfg.Logger.Warn("agent: SIGTERM", "task", id, "pid", p.handle.Pid, "err", err)
	}
	pid := p.handle.Pid
	p.kill = e.cfg.Clock.AfterFunc(grace, func() {
		e.mu.Lock()
		still := e.mu.procs[id] == p
		e.mu.Unlock()
		if still {
			_ = killGroup(pid, syscall.SIGKILL)
		}
	})
}
