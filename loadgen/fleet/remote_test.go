package fleet

import (
	"io"
	"sync"
	"testing"
	"time"
)

// recorder keeps what an Observer (obsSink(r.add)) was told.
type recorder struct {
	mu   sync.Mutex
	got  []obs
	gate chan struct{} // the first observation waits until it is closed
}

func (r *recorder) add(o obs) {
	if r.gate != nil {
		<-r.gate
	}
	r.mu.Lock()
	r.got = append(r.got, o)
	r.mu.Unlock()
}

// Property: every observation the child's agents make reaches the
// loadgen's observer once, and each agent's in the order it made them,
// also when the queue fills up (agents then wait, nothing is dropped).
func TestObservationsArriveInOrder(t *testing.T) {
	pr, pw := io.Pipe()
	w := newObsWriter(pw, 1<<16)
	agent := obsSink(w.add)
	// The loadgen reads nothing until the child's queue is full.
	rec := &recorder{gate: make(chan struct{})}
	r := newRemote(1, obsSink(rec.add), nil)
	c := &child{sink: func(b obsBatch) { r.merge(0, b) }, done: make(chan struct{})}
	go c.readObs(pr)
	full := make(chan struct{})
	go func() { w.waitFull(); close(full) }()
	go func() {
		select {
		case <-full:
		case <-time.After(30 * time.Second):
			t.Error("the child's queue never filled up")
		}
		close(rec.gate)
	}()

	const agents, each = 8, 3 * (1 << 16) / 8 // more than the queue holds
	t0 := time.Unix(1_700_000_000, 0)
	var wg sync.WaitGroup
	for a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				task := uint64(a)<<32 | uint64(i)
				switch i % 3 {
				case 0:
					agent.Handed(uint32(a+1), task, t0.Add(time.Duration(i)))
				case 1:
					agent.Hold(uint32(a+1), task, []string{"net"}, []string{"10.0.0.1/24"}, t0.Add(time.Duration(i)))
				default:
					agent.Release(task, t0.Add(time.Duration(i)))
				}
			}
		}()
	}
	wg.Wait()
	w.close()
	<-w.flushed
	pw.Close()
	<-c.done

	if len(rec.got) != agents*each {
		t.Fatalf("%d observations arrived, want %d", len(rec.got), agents*each)
	}
	next := make([]uint64, agents)
	for _, o := range rec.got {
		a, i := o.Task>>32, o.Task&(1<<32-1)
		if i != next[a] {
			t.Fatalf("agent %d: observation %d arrived when %d was due", a, i, next[a])
		}
		if want := uint8(i % 3); o.Kind != want || o.At != t0.Add(time.Duration(i)).UnixNano() {
			t.Fatalf("agent %d observation %d: kind %d at %d, want kind %d at %d", a, i, o.Kind, o.At, want, t0.Add(time.Duration(i)).UnixNano())
		}
		if o.Kind == obsHold && (len(o.Addrs) != 1 || o.Addrs[0] != "10.0.0.1/24") {
			t.Fatalf("agent %d observation %d: addresses %v", a, i, o.Addrs)
		}
		next[a]++
	}
}
