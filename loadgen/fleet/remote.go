package fleet

import (
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/rpc"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// child is one fleet process (serve.go) as the loadgen drives it.
type child struct {
	cmd  *exec.Cmd
	rpc  *rpc.Client
	sink func(obsBatch) // each batch of observations, in order
	done chan struct{}  // the observations stream ended
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
	dec := gob.NewDecoder(rd)
	for {
		var b obsBatch
		if err := dec.Decode(&b); err != nil {
			return
		}
		c.sink(b)
	}
}

// rpcCall runs one method in the child; a child that is gone answers with
// the zero value (the run then sees no agents and says so).
func rpcCall[R any](c *child, method string, args any) R {
	var out R
	_ = c.rpc.Call("Fleet."+method, args, &out)
	return out
}

// stop stops the child's agents, waits until their observations are in,
// and ends the child.
func (c *child) stop() {
	rpcCall[bool](c, "Stop", 0)
	_ = c.rpc.Close() // closes the child's stdin: it exits
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
	}
	_ = c.cmd.Wait()
}

func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	_ = c.rpc.Close()
	_ = c.cmd.Wait()
}
