package watch

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"syscall"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/internal/jsoncodec"
	"shoal/loadgen/check"
)

// randString is a string the server may write: mostly plain, sometimes
// with what JSON escapes or what is not ASCII.
func randString(rng *rand.Rand, plain []string) string {
	if rng.IntN(8) > 0 {
		return plain[rng.IntN(len(plain))]
	}
	odd := []string{"", "a\"b", `back\slash`, "<tag>&", "é-ü", "tab\there", "nl\n", "\x7f", "ok-name_1.2", "\u2028", string([]byte{0xff, 'x'})}
	return odd[rng.IntN(len(odd))]
}

func randUint32(rng *rand.Rand) uint32 {
	switch rng.IntN(4) {
	case 0:
		return 0
	case 1:
		return ^uint32(0) - uint32(rng.IntN(2))
	default:
		return rng.Uint32() >> rng.IntN(32)
	}
}

// randEvent is an event of any topic, most of them task events with a
// task, as the server renders them.
func randEvent(rng *rand.Rand) client.Event {
	ev := client.Event{
		Index: randString(rng, []string{"", "AAEAAAAAAAAABw", "g1-123-45", strconv.FormatUint(rng.Uint64(), 36)}),
		Group: rng.IntN(9),
		Raft:  rng.Uint64() >> rng.IntN(64),
		Topic: []string{"task", "task", "task", "heartbeat", "service", "node"}[rng.IntN(6)],
		Type:  randString(rng, []string{"state", "changed", "deleted", "created", ""}),
	}
	if rng.IntN(20) == 0 {
		ev.Group = -rng.IntN(3)
	}
	switch ev.Topic {
	case "task":
		id := strconv.FormatUint(rng.Uint64()>>rng.IntN(64), 10)
		ev.Key = id
		if rng.IntN(10) == 0 {
			break // deleted, or gone when rendered
		}
		t := &client.Task{ID: id, Service: randString(rng, []string{"svc-001", "web", "svc-099"}),
			Slot: randUint32(rng), SpecVersion: randUint32(rng), Node: randUint32(rng),
			Desired: randString(rng, []string{"running", "shutdown"}),
			State:   randString(rng, []string{"pending", "assigned", "starting", "running", "complete", "shutdown"})}
		if rng.IntN(12) == 0 {
			t.ID = strconv.Itoa(rng.IntN(100))
		}
		if rng.IntN(2) == 0 {
			t.NodeName = randString(rng, []string{"sim-00001", "node-7"})
		}
		if rng.IntN(4) == 0 {
			t.ExitCode = int32(rng.Uint32())
		}
		if rng.IntN(4) == 0 {
			t.Message = randString(rng, []string{"exited", "stopped by orchestrator", "x",
				`waiting for an address: network "net-000" has no free address`, `a\b "c"`, "two\nlines\tand a tab"})
		}
		t.Since = time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)*int64(rng.IntN(2))).UTC()
		if rng.IntN(6) == 0 {
			t.Since = t.Since.In(time.FixedZone("", (rng.IntN(48)-24)*1800))
		}
		for range rng.IntN(4) {
			t.Addresses = append(t.Addresses, client.TaskAddress{Network: randString(rng, []string{"net-01", "overlay"}),
				Addr: randString(rng, []string{"10.0.0.2/24", "10.1.2.3/16", "fd00::1/64"}), Released: rng.IntN(3) == 0})
		}
		if rng.IntN(30) == 0 {
			t.History = []client.HistoryEntry{{At: t.Since, Kind: "state", State: t.State, By: "agent", Desired: t.Desired}}
		}
		ev.Task = t
	case "service":
		ev.Key = randString(rng, []string{"svc-001", "web"})
		if rng.IntN(3) > 0 {
			ev.Service = &client.Service{ID: uint32(rng.IntN(1000)), Group: rng.IntN(9)}
		}
	case "node":
		ev.Key = strconv.Itoa(rng.IntN(10000))
		if rng.IntN(3) > 0 {
			ev.Node = &client.Node{ID: uint32(rng.IntN(10000)), Name: "sim-1", Availability: "active"}
		}
	}
	return ev
}

// mutate changes a line a little: a byte dropped, doubled, replaced or
// inserted, or a piece of the line swapped with its neighbour.
func mutate(rng *rand.Rand, line []byte) []byte {
	b := append([]byte(nil), line...)
	if len(b) == 0 {
		return b
	}
	i := rng.IntN(len(b))
	bytesOf := []byte(`"\{}[],:-0123456789e. ` + "\xc3\x00")
	switch rng.IntN(5) {
	case 0:
		return append(b[:i], b[i+1:]...)
	case 1:
		return append(b[:i+1], b[i:]...)
	case 2:
		b[i] = bytesOf[rng.IntN(len(bytesOf))]
		return b
	case 3:
		return append(b[:i], append([]byte{bytesOf[rng.IntN(len(bytesOf))]}, b[i:]...)...)
	default:
		j := i + rng.IntN(len(b)-i)
		k := j + rng.IntN(len(b)-j+1)
		return append(append(append(b[:i:i], b[j:k]...), b[i:j]...), b[k:]...)
	}
}

// The decoder gives what the codec gives: the same event, or an error
// when the codec has one, for random events as the server writes them and
// for those lines changed a little.
func TestDecoderIsTheCodecs(t *testing.T) {
	fastLines := 0
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 35))
		d := NewDecoder()
		for step := range 200 {
			ev := randEvent(rng)
			line, err := jsoncodec.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			if rng.IntN(3) == 0 {
				line = mutate(rng, line)
			}
			var want, got client.Event
			werr := jsoncodec.Unmarshal(line, &want)
			gerr := d.Decode(line, &got)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("seed %d step %d: %s\ncodec error %v, decoder error %v", seed, step, line, werr, gerr)
			}
			if werr != nil {
				continue
			}
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("seed %d step %d: %s\ncodec   %s\ndecoder %s", seed, step, line, show(want), show(got))
			}
			var scratch client.Event
			if d.fast(line, &scratch) {
				fastLines++
			}
		}
	}
	// Most of the lines take the decoder's own path (else this test
	// would hold only the codec to itself).
	if fastLines < 15000 {
		t.Fatalf("only %d lines took the decoder's own path", fastLines)
	}
}

// Escapes written by hand (the codec writes only some of them) decode as
// the codec decodes them.
func TestDecoderTakesEscapesAsTheCodec(t *testing.T) {
	const head = `{"index":"x","group":1,"raft":2,"topic":"task","type":"state","key":"7","task":{"id":"7","service":"s","slot":1,"spec_version":1,"desired":"running","state":"new","message":`
	const tail = `,"since":"2026-11-28T01:47:23.781328452Z"}}`
	for _, msg := range []string{`"a\"b"`, `"\/\b\f\n\r\t\\"`, `"\u0041"`, `"\ud83d\ude00"`, `"\x"`, `"\"`, `"ends\`, `"é"`, `""`, `"\""`} {
		line := []byte(head + msg + tail)
		var want, got client.Event
		werr := jsoncodec.Unmarshal(line, &want)
		gerr := NewDecoder().Decode(line, &got)
		if (werr == nil) != (gerr == nil) || werr == nil && !reflect.DeepEqual(want, got) {
			t.Errorf("message %s: codec %v %s, decoder %v %s", msg, werr, show(want), gerr, show(got))
		}
	}
}

func show(ev client.Event) string {
	s := fmt.Sprintf("%+v", ev)
	if ev.Task != nil {
		s += fmt.Sprintf(" task %+v", *ev.Task)
	}
	return s
}

// rampLines are the lines of a ramp's task events as the server writes
// them: n tasks, each rendered pending, assigned, starting and running
// with one address.
func rampLines(n int) [][]byte {
	var lines [][]byte
	since := time.Date(2026, 11, 28, 1, 2, 3, 456789000, time.UTC)
	raft := uint64(1000)
	for _, st := range []string{"pending", "assigned", "starting", "running"} {
		for i := range n {
			raft++
			id := strconv.FormatUint(1<<50+uint64(i), 10)
			t := &client.Task{ID: id, Service: "svc-" + strconv.Itoa(i%100), Slot: uint32(i/100 + 1), SpecVersion: 1,
				Desired: "running", State: st, Since: since.Add(time.Duration(raft) * time.Millisecond),
				Addresses: []client.TaskAddress{{Network: "net-" + strconv.Itoa(i%100), Addr: fmt.Sprintf("10.%d.%d.%d/16", i%100, i/256%256, i%256)}}}
			if st != "pending" {
				t.Node = uint32(i%1000 + 1)
				t.NodeName = "sim-" + strconv.Itoa(int(t.Node))
			}
			line, err := jsoncodec.Marshal(client.Event{Index: "AAEAAAAAAA" + strconv.FormatUint(raft, 36), Group: 1 + i%8, Raft: raft,
				Topic: "task", Type: "state", Key: id, Task: t})
			if err != nil {
				panic(err)
			}
			lines = append(lines, line)
		}
	}
	return lines
}

// BenchmarkStreamEvent decodes and checks a ramp's event lines, as the
// loadgen's stream reader does with each: with the codec and with the
// decoder (ns and allocations per event).
func BenchmarkStreamEvent(b *testing.B) {
	lines := rampLines(20000)
	for _, bc := range []struct {
		name   string
		decode func() func([]byte, *client.Event) error
	}{
		{"codec", func() func([]byte, *client.Event) error {
			return func(l []byte, ev *client.Event) error { return jsoncodec.Unmarshal(l, ev) }
		}},
		{"decoder", func() func([]byte, *client.Event) error { return NewDecoder().Decode }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			t0 := time.Now()
			cpu0 := cpuNanos()
			for b.Loop() {
				c := check.New(t0)
				decode := bc.decode()
				var ev client.Event // as client.Events reads a stream
				for _, l := range lines {
					ev = client.Event{}
					if err := decode(l, &ev); err != nil {
						b.Fatal(err)
					}
					c.Event(ev, 1, t0)
				}
			}
			reportPerEvent(b, cpu0, len(lines))
		})
	}
}

// BenchmarkDecode is the decoding alone.
func BenchmarkDecode(b *testing.B) {
	lines := rampLines(20000)
	for _, bc := range []struct {
		name   string
		decode func([]byte, *client.Event) error
	}{
		{"codec", func(l []byte, ev *client.Event) error { return jsoncodec.Unmarshal(l, ev) }},
		{"decoder", NewDecoder().Decode},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cpu0 := cpuNanos()
			var ev client.Event
			for b.Loop() {
				for _, l := range lines {
					ev = client.Event{}
					if err := bc.decode(l, &ev); err != nil {
						b.Fatal(err)
					}
				}
			}
			reportPerEvent(b, cpu0, len(lines))
		})
	}
}

// cpuNanos is the CPU the test process used so far (user and system, the
// collector's threads included): on a shared machine it moves far less
// than the wall clock.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// reportPerEvent reports wall and CPU nanoseconds per event since cpu0.
func reportPerEvent(b *testing.B, cpu0 int64, events int) {
	n := float64(b.N * events)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/event")
	b.ReportMetric(float64(cpuNanos()-cpu0)/n, "cpu-ns/event")
	b.ReportMetric(0, "ns/op")
}
