package main

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"shoal/api/client"
)

// regOp is one operation on a service's environment, seen as a register:
// a full update writes it, a read returns it.
type regOp struct {
	Write   bool
	Service string
	Value   string // what a write sets
}

// registerModel is a register per service (the history is checked per
// service).
var registerModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			s := op.Input.(regOp).Service
			if _, ok := by[s]; !ok {
				keys = append(keys, s)
			}
			by[s] = append(by[s], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, in, out any) (bool, any) {
		op := in.(regOp)
		if op.Write {
			return true, op.Value
		}
		return out.(string) == state.(string), state
	},
	DescribeOperation: func(in, out any) string {
		op := in.(regOp)
		if op.Write {
			return fmt.Sprintf("write %s %q", op.Service, op.Value)
		}
		return fmt.Sprintf("read %s → %q", op.Service, out)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%q", state) },
}

// unknownReturn is the return of a write whose outcome its client never
// learned: it may take effect at any point after its call, or never.
const unknownReturn = math.MaxInt64

// history is the API operations of a test, from several goroutines.
type history struct {
	mu  sync.Mutex
	t0  time.Time
	ops []porcupine.Operation
	// local: each replica's last spec version of a service read locally;
	// backwards: the reads that went back.
	local     map[string]uint32
	backwards []string
}

func newHistory() *history {
	return &history{t0: time.Now(), local: map[string]uint32{}}
}

func (h *history) add(client int, in regOp, out string, call, ret time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := int64(unknownReturn)
	if !ret.IsZero() {
		r = ret.Sub(h.t0).Nanoseconds()
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call.Sub(h.t0).Nanoseconds(), Output: out, Return: r})
}

// write records a write with its outcome: applied ones until ret (the
// zero time: unknown), refused ones not at all.
func (h *history) write(client int, service, value string, call, ret time.Time) {
	h.add(client, regOp{Write: true, Service: service, Value: value}, "", call, ret)
}

// localRead records a replica's local read of a service's spec version,
// which must never go back on that replica.
func (h *history) localRead(replica int, service string, version uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := fmt.Sprintf("%d/%s", replica, service)
	if last := h.local[k]; version < last {
		h.backwards = append(h.backwards, fmt.Sprintf("replica %d read %s at spec version %d after %d", replica+1, service, version, last))
	}
	h.local[k] = max(h.local[k], version)
}

// check fails the test if the consistent reads and the writes are not
// linearizable (within a time limit, whose expiry fails it too) or a
// local read went back; the visualization of a failure is kept.
func (h *history) check(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.backwards {
		t.Errorf("a local read went back: %s", b)
	}
	t0 := time.Now()
	res, info := porcupine.CheckOperationsVerbose(registerModel, h.ops, 30*time.Second)
	fmt.Printf("partition: linearizability: %d operations, %s in %s\n", len(h.ops), res, time.Since(t0).Round(time.Millisecond))
	switch res {
	case porcupine.Illegal:
		path := filepath.Join(os.TempDir(), fmt.Sprintf("shoal-partition-%d.html", os.Getpid()))
		if err := porcupine.VisualizePath(registerModel, info, path); err != nil {
			path = err.Error()
		}
		t.Errorf("the history of writes and consistent reads is not linearizable (visualization: %s)", path)
	case porcupine.Unknown:
		t.Errorf("the linearizability check did not finish within 30 s (%d operations)", len(h.ops))
	}
}

// envOf is a service's environment as the register's value.
func envOf(s client.Service) string { return strings.Join(s.Spec.Env, ",") }

// readers reads each service through every replica until stop: through
// its quorum (consistent, checked for linearizability; a replica without
// one answers 503, not recorded) and locally (checked for never going
// back on that replica).
func (c *nsCluster) readers(h *history, services []string, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	consistent := &client.Query{Params: url.Values{"consistent": {"true"}}}
	for i := range c.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				for _, name := range services {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					call := time.Now()
					s, _, err := c.clients[i].Service(ctx, name, consistent)
					if err == nil {
						h.add(10+i, regOp{Service: name}, envOf(s), call, time.Now())
					}
					if s, _, err := c.clients[i].Service(ctx, name, nil); err == nil {
						h.localRead(i, name, s.SpecVersion)
					}
					cancel()
				}
			}
		}()
	}
	return &wg
}
