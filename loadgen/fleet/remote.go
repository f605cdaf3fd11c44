package fleet

import (
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/rpc"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Remote is a fleet run by a child process (serve.go); its methods are
// Fleet's.
type Remote struct {
	cmd  *exec.Cmd
	rpc  *rpc.Client
	obs  Observer
	done chan struct{} // the observations stream ended
	stop sync.Once
}

// StartRemote starts `binary loadgen-fleet` running cfg's agents; what
// they observe goes to obs (nil: nothing). The child's own messages go to
// stderr.
func StartRemote(binary string, cfg ChildConfig, obs Observer, stderr io.Writer) (*Remote, error) {
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	obsR, obsW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, "loadgen-fleet")
	cmd.Env = append(os.Environ(), ConfigEnv+"="+string(js))
	cmd.Stderr = stderr
	cmd.ExtraFiles = []*os.File{obsW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		obsR.Close()
		obsW.Close()
		return nil, fmt.Errorf("start the simulated agents' process: %w", err)
	}
	obsW.Close() // the child holds its end
	r := &Remote{cmd: cmd, obs: obs, done: make(chan struct{}),
		rpc: rpc.NewClient(struct {
			io.Reader
			io.WriteCloser
		}{out, in})}
	go r.readObs(obsR)
	// The child answers once its agents started; a binary that is not
	// shoal (or one too old to have loadgen-fleet) never does.
	call := r.rpc.Go("Fleet.Connected", 0, new(int), nil)
	select {
	case <-call.Done:
		if call.Error == nil {
			return r, nil
		}
		err = call.Error
	case <-time.After(time.Minute):
		err = errors.New("no answer within a minute")
	}
	_ = cmd.Process.Kill()
	_ = r.rpc.Close()
	_ = cmd.Wait()
	return nil, fmt.Errorf("the simulated agents' process (%s loadgen-fleet) did not start: %v; is it a shoal binary of this version?", binary, err)
}

// readObs hands the child's observations to the observer, in order.
func (r *Remote) readObs(rd io.ReadCloser) {
	defer close(r.done)
	defer rd.Close()
	dec := gob.NewDecoder(rd)
	for {
		var batch []obs
		if err := dec.Decode(&batch); err != nil {
			return
		}
		if r.obs == nil {
			continue
		}
		for _, o := range batch {
			at := time.Unix(0, o.At)
			switch o.Kind {
			case obsHanded:
				r.obs.Handed(o.Node, o.Task, at)
			case obsHold:
				r.obs.Hold(o.Node, o.Task, o.Nets, o.Addrs, at)
			case obsRelease:
				r.obs.Release(o.Task, at)
			}
		}
	}
}

// remoteCall runs one method in the child; a child that is gone answers with
// the zero value (the run then sees no agents and says so).
func remoteCall[R any](r *Remote, method string, args any) R {
	var out R
	_ = r.rpc.Call("Fleet."+method, args, &out)
	return out
}

func (r *Remote) Partition(i int, d time.Duration) {
	remoteCall[bool](r, "Partition", PartitionArgs{I: i, D: d})
}
func (r *Remote) Vanish(i int) bool  { return remoteCall[bool](r, "Vanish", i) }
func (r *Remote) Return(i int)       { remoteCall[bool](r, "Return", i) }
func (r *Remote) Gone(i int) bool    { return remoteCall[bool](r, "Gone", i) }
func (r *Remote) Connected() int     { return remoteCall[int](r, "Connected", 0) }
func (r *Remote) Live() []bool       { return remoteCall[[]bool](r, "Live", 0) }
func (r *Remote) Nodes() []uint32    { return remoteCall[[]uint32](r, "Nodes", 0) }
func (r *Remote) Crash(i, n int) int { return remoteCall[int](r, "Crash", CrashArgs{I: i, N: n}) }
func (r *Remote) Probe(node uint32, task uint64) string {
	return remoteCall[string](r, "Probe", ProbeArgs{Node: node, Task: task})
}
func (r *Remote) HeartbeatsSince(t time.Time) []bool {
	return remoteCall[[]bool](r, "HeartbeatsSince", t)
}

// Stop stops every agent, waits until their observations are in, and
// ends the child; later calls do nothing.
func (r *Remote) Stop() {
	r.stop.Do(func() {
		remoteCall[bool](r, "Stop", 0)
		_ = r.rpc.Close() // closes the child's stdin: it exits
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
		}
		_ = r.cmd.Wait()
	})
}
