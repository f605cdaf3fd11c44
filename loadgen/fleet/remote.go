package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/rpc"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// child is one fleet process (serve.go) as the loadgen drives it: a local
// child process, or a fleet worker on another host.
type child struct {
	cmd    *exec.Cmd // a local child; nil for a worker
	w      *Worker   // a worker; nil for a local child
	name   string
	rpc    *rpc.Client
	sink   func(obsBatch) // each batch of observations, in order (b.Obs is reused after it returns)
	done   chan struct{}  // the observations stream ended
	lo     int            // its first agent's index in the Remote
	agents int
	// stopping: Stop was asked for, so the end of the stream is no loss;
	// dead: it ended without (its agents are gone).
	stopping, dead atomic.Bool
	mu             struct {
		sync.Mutex
		cpu float64 // a worker's CPU seconds at the last reading
	}
}

// startWorker hands worker w its share cfg and drives it as a child: net/rpc
// over its control connection, observations over the other.
func startWorker(w *Worker, cfg ChildConfig, sink func(obsBatch)) (*child, error) {
	if err := writeLine(w.ctl, controlMsg{Config: &cfg}); err != nil {
		w.close()
		return nil, fmt.Errorf("fleet worker %d (%s): %w", w.ID, w.Host, err)
	}
	c := &child{w: w, sink: sink, done: make(chan struct{}), rpc: rpc.NewClient(w.ctl),
		name: fmt.Sprintf("fleet worker %d (%s, %s)", w.ID, w.Host, w.Remote)}
	go c.readObs(w.obsConn)
	call := c.rpc.Go("Fleet.Connected", 0, new(int), nil)
	select {
	case <-call.Done:
		if call.Error == nil {
			return c, nil
		}
		c.kill()
		return nil, fmt.Errorf("%s did not start its agents: %v", c.name, call.Error)
	case <-time.After(time.Minute):
		c.kill()
		return nil, fmt.Errorf("%s did not start its agents within a minute", c.name)
	}
}

// startChild starts `binary loadgen-fleet` running cfg's agents; each batch
// of what they observe goes to sink. The child's own messages go to
// stderr.
func startChild(binary string, cfg ChildConfig, sink func(obsBatch), stderr io.Writer) (*child, error) {
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
	c := &child{cmd: cmd, sink: sink, done: make(chan struct{}),
		rpc: rpc.NewClient(struct {
			io.Reader
			io.WriteCloser
		}{out, in})}
	go c.readObs(obsR)
	// The child answers once its agents started; a binary that is not
	// shoal (or one too old to have loadgen-fleet) never does.
	call := c.rpc.Go("Fleet.Connected", 0, new(int), nil)
	select {
	case <-call.Done:
		if call.Error == nil {
			return c, nil
		}
		err = call.Error
	case <-time.After(time.Minute):
		err = errors.New("no answer within a minute")
	}
	c.kill()
	return nil, fmt.Errorf("the simulated agents' process (%s loadgen-fleet) did not start: %v; is it a shoal binary of this version?", binary, err)
}

// readObs hands the child's batches to the sink, in order; when the stream
// ends, a last empty batch promises that nothing follows.
func (c *child) readObs(rd io.ReadCloser) {
	defer close(c.done)
	defer rd.Close()
	defer c.sink(obsBatch{Upto: math.MaxInt64})
	dec := newObsDecoder(rd)
	for {
		b, err := dec.decode()
		if err != nil {
			return
		}
		c.sink(b) // copies what it keeps: the next decode reuses b.Obs
	}
}

// rpcCall runs one method in the child; a child that is gone answers with
// the zero value (the run then sees no agents and says so).
//
// A worker on another host may vanish without its connection closing (its
// host died, the network between was cut): a call it does not answer
// within workerCallTimeout (Stop: workerStopTimeout) closes its
// connections, and it is lost like a worker that died.
func rpcCall[R any](c *child, method string, args any) R {
	var out R
	if c.w == nil {
		_ = c.rpc.Call("Fleet."+method, args, &out)
		return out
	}
	limit := workerCallTimeout
	if method == "Stop" {
		limit = workerStopTimeout
	}
	call := c.rpc.Go("Fleet."+method, args, &out, make(chan *rpc.Call, 1))
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-call.Done:
	case <-t.C:
		c.w.close()
		<-call.Done // the closed connection ends every call under way
		var zero R
		return zero
	}
	return out
}

var (
	workerCallTimeout = 15 * time.Second
	workerStopTimeout = time.Minute
)

// stop stops the child's agents, waits until their observations are in,
// and ends the child.
func (c *child) stop() {
	c.stopping.Store(true)
	rpcCall[bool](c, "Stop", 0)
	_ = c.rpc.Close() // closes the child's stdin: it exits
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
	}
	if c.cmd != nil {
		_ = c.cmd.Wait()
	} else {
		c.w.close()
	}
}

func (c *child) kill() {
	c.stopping.Store(true)
	if c.cmd != nil {
		_ = c.cmd.Process.Kill()
	}
	_ = c.rpc.Close()
	if c.cmd != nil {
		_ = c.cmd.Wait()
	} else {
		c.w.close()
	}
}
