package watch

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"shoal/api/client"
	"shoal/internal/jsoncodec"
)

// str draws one of plain, or when odd now and then a string with what
// JSON escapes or what is not ASCII.
func str(t *rapid.T, odd bool, label string, plain ...string) string {
	if odd && rapid.Bool().Draw(t, label+" odd") {
		return rapid.SampledFrom([]string{"", "a\"b", `back\slash`, "<tag>&", "é-ü", "tab\there", "nl\n", "\x7f", "\u2028", string([]byte{0xff, 'x'})}).Draw(t, label)
	}
	return rapid.SampledFrom(plain).Draw(t, label)
}

// taskGen draws a task as the server renders one in a list; with odd, its
// strings may be odd ones (str), and it may have a history (the server
// never writes one in a list).
func taskGen(odd bool) *rapid.Generator[client.Task] {
	return rapid.Custom(func(t *rapid.T) client.Task {
		u32 := rapid.OneOf(rapid.Just(uint32(0)), rapid.Uint32(), rapid.Uint32Range(0, 2000))
		tk := client.Task{
			ID:          strconv.FormatUint(rapid.Uint64().Draw(t, "id")>>rapid.IntRange(0, 63).Draw(t, "shift"), 10),
			Service:     str(t, odd, "service", "svc-001", "web", "svc-099"),
			Slot:        u32.Draw(t, "slot"),
			SpecVersion: u32.Draw(t, "spec_version"),
			Node:        u32.Draw(t, "node"),
			Desired:     str(t, odd, "desired", "running", "shutdown"),
			State:       str(t, odd, "state", "pending", "assigned", "starting", "running", "complete", "shutdown"),
		}
		if odd && rapid.Bool().Draw(t, "odd id") {
			tk.ID = str(t, odd, "id2", "7", "x")
		}
		if rapid.Bool().Draw(t, "named") {
			tk.NodeName = str(t, odd, "node_name", "sim-00001", "node-7")
		}
		if rapid.Bool().Draw(t, "exited") {
			tk.ExitCode = rapid.Int32Range(-1<<31+1, 1<<31-1).Draw(t, "exit_code")
			if odd && rapid.Bool().Draw(t, "lowest") {
				tk.ExitCode = -1 << 31
			}
		}
		if rapid.Bool().Draw(t, "said") {
			tk.Message = str(t, odd, "message", "exited", "stopped by orchestrator",
				`waiting for an address: network "net-000" has no free address`, "two\nlines\tand a tab")
		}
		tk.Since = time.Unix(rapid.Int64Range(0, 4e9).Draw(t, "sec"), rapid.Int64Range(0, 1e9-1).Draw(t, "nsec")).UTC()
		if rapid.Bool().Draw(t, "zoned") {
			tk.Since = tk.Since.In(time.FixedZone("", rapid.IntRange(-24, 24).Draw(t, "zone")*1800))
		}
		for i := range rapid.IntRange(0, 3).Draw(t, "addresses") {
			tk.Addresses = append(tk.Addresses, client.TaskAddress{
				Network:  str(t, odd, fmt.Sprint("network", i), "net-01", "overlay"),
				Addr:     str(t, odd, fmt.Sprint("addr", i), "10.0.0.2/24", "10.1.2.3/16", "fd00::1/64"),
				Released: rapid.Bool().Draw(t, fmt.Sprint("released", i))})
		}
		if odd && rapid.Bool().Draw(t, "historic") {
			tk.History = []client.HistoryEntry{{At: tk.Since, Kind: "state", State: tk.State, By: "agent", Desired: tk.Desired}}
		}
		return tk
	})
}

// pageBody is a page as the server writes it (api/server.go's reply: the
// codec's bytes and a newline).
func pageBody(t *rapid.T, l client.List[client.Task]) []byte {
	b, err := jsoncodec.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// Property: for random pages as the server writes them, and those pages
// changed a little, the list decoder gives what the codec gives: the same
// list, or an error when the codec has one.
func TestListDecoderIsTheCodecs(t *testing.T) {
	fast, pages := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		var l client.List[client.Task]
		switch rapid.IntRange(0, 19).Draw(t, "items") {
		case 0: // nil: the server always writes a list, the codec null
		case 1:
			l.Items = []client.Task{}
		default:
			// A page of plain tasks and now and then an odd one.
			l.Items = rapid.SliceOfN(taskGen(false), 1, 12).Draw(t, "tasks")
			if rapid.Bool().Draw(t, "odd") {
				i := rapid.IntRange(0, len(l.Items)-1).Draw(t, "at")
				l.Items[i] = taskGen(true).Draw(t, "odd task")
			}
		}
		if rapid.Bool().Draw(t, "more") {
			l.NextToken = str(t, true, "next_token", "123456789", "18446744073709551615")
		}
		body := pageBody(t, l)
		d := NewListDecoder()
		if rapid.IntRange(0, 3).Draw(t, "mutated") == 0 {
			rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "mutation"), 35))
			for range rapid.IntRange(1, 3).Draw(t, "mutations") {
				body = mutate(rng, body)
			}
		} else if rapid.Bool().Draw(t, "tail") && rapid.Bool().Draw(t, "tail2") {
			// What follows the value: white space, which the codec takes,
			// or anything else, which it refuses.
			body = append(body, rapid.SampledFrom([]string{" ", "\r\n\t", "x", "}", "\n{}", ",", "0"}).Draw(t, "after")...)
		} else if rapid.Bool().Draw(t, "twice") {
			// A decoder reads the pages of one resync: the strings it
			// shares from one page must not bend the next.
			var first client.List[client.Task]
			_ = d.Decode(pageBody(t, client.List[client.Task]{Items: rapid.SliceOfN(taskGen(true), 0, 5).Draw(t, "first")}), &first)
		}
		var want, got client.List[client.Task]
		werr := jsoncodec.Unmarshal(body, &want)
		gerr := d.Decode(body, &got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%s\ncodec error %v, decoder error %v", body, werr, gerr)
		}
		if werr != nil {
			return
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("%s\ncodec   %+v\ndecoder %+v", body, want, got)
		}
		pages++
		var scratch client.List[client.Task]
		if d.fast(body, &scratch) {
			fast++
		}
	})
	// Many pages take the decoder's own path (else this test would hold
	// only the codec to itself).
	t.Logf("%d of %d pages took the decoder's own path", fast, pages)
	if pages > 0 && fast*6 < pages {
		t.Fatalf("only %d of %d pages took the decoder's own path", fast, pages)
	}
}

// rampPage is a page of n tasks of a ramp's list, running, as the server
// writes it.
func rampPage(n int) []byte {
	since := time.Date(2026, 11, 28, 1, 2, 3, 456789000, time.UTC)
	l := client.List[client.Task]{NextToken: strconv.FormatUint(1<<50+uint64(n), 10)}
	for i := range n {
		node := uint32(i%1000 + 1)
		l.Items = append(l.Items, client.Task{ID: strconv.FormatUint(1<<50+uint64(i), 10), Service: "svc-" + strconv.Itoa(i%100),
			Slot: uint32(i/100 + 1), SpecVersion: 1, Node: node, NodeName: "sim-" + strconv.Itoa(int(node)),
			Desired: "running", State: "running", Since: since.Add(time.Duration(i) * time.Millisecond),
			Addresses: []client.TaskAddress{{Network: "net-" + strconv.Itoa(i%100), Addr: fmt.Sprintf("10.%d.%d.%d/16", i%100, i/256%256, i%256)}}})
	}
	b, err := jsoncodec.Marshal(l)
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// BenchmarkListPage decodes a resync's page of 10,000 running tasks with
// the codec and with the list decoder (ns and allocations per task).
func BenchmarkListPage(b *testing.B) {
	const n = 10000
	body := rampPage(n)
	d := NewListDecoder()
	for _, bc := range []struct {
		name   string
		decode func([]byte, *client.List[client.Task]) error
	}{
		{"codec", func(body []byte, l *client.List[client.Task]) error { return jsoncodec.Unmarshal(body, l) }},
		{"decoder", d.Decode},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuNanos()
			for b.Loop() {
				var l client.List[client.Task]
				if err := bc.decode(body, &l); err != nil || len(l.Items) != n {
					b.Fatal(err, len(l.Items))
				}
			}
			n := float64(b.N * n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/task")
			b.ReportMetric(float64(cpuNanos()-cpu0)/n, "cpu-ns/task")
		})
	}
}
