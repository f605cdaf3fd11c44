package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"shoal/api/client"
	"shoal/internal/jsoncodec"
	"shoal/manager/control"
	"shoal/statemachine"
)

// Property: for any task, with any names, messages, exit codes, times,
// nodes and addresses, the line a task event's render writes is the line
// the JSON codec writes for the client.Event of the general path — and
// the line encoding/json writes — whether the line was written straight
// from the state (appendTaskEvent) or, for a string that is not plain, by
// the codec.
func TestTaskEventLinesAreTheCodecs(t *testing.T) {
	var straight, general int
	defer func() {
		t.Logf("%d lines written straight, %d by the codec", straight, general)
		if straight < 300 || general < 100 {
			t.Errorf("the draws made too few lines of one kind")
		}
	}()
	// A name is mostly plain, sometimes plain but for one odd character
	// (one JSON escapes, or non-ASCII, or invalid UTF-8), sometimes any
	// string at all.
	plain := rapid.StringMatching(`[a-zA-Z0-9 ._:/=+-]{0,12}`)
	name := func(rt *rapid.T, label string) string {
		switch rapid.IntRange(0, 7).Draw(rt, label+" kind") {
		case 0:
			odd := rapid.SampledFrom([]string{`"`, `\`, "<", ">", "&", "\n", "\t", "\x01", "\x1f", "\x7f", "é", "\u2028", "\xff", "\xe2\x80"}).Draw(rt, label+" odd")
			return plain.Draw(rt, label) + odd + plain.Draw(rt, label)
		case 1:
			return rapid.String().Draw(rt, label)
		}
		return plain.Draw(rt, label)
	}
	rapid.Check(t, func(rt *rapid.T) {
		w := newEventWorldAt(t, 1024, 2, nil) // group 1's state: tasks get addresses
		nets := rapid.IntRange(0, 2).Draw(rt, "networks")
		var netNames []string
		for i := range nets {
			n := fmt.Sprintf("net%d-%s", i, name(rt, "network"))
			netNames = append(netNames, n)
			w.apply(statemachine.Command{Kind: statemachine.CmdCreateNetwork, NetworkSpec: &statemachine.Network{
				ID: statemachine.NetworkID(i + 1), Name: n, Subnet: fmt.Sprintf("10.%d.0.0/%d", 16+i, rapid.IntRange(16, 24).Draw(rt, "bits"))}})
		}
		for n := 1; n <= 3; n++ {
			w.apply(statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{ID: statemachine.NodeID(n),
				Name: name(rt, "node"), CPU: 1 << 30, Memory: 1 << 40}})
		}
		w.apply(statemachine.Command{Kind: statemachine.CmdCreateService, Spec: &statemachine.ServiceSpec{
			Name: "svc-" + name(rt, "service"), Replicas: 4, Image: "img", Networks: netNames}})
		st := w.r.st
		ids := st.TaskIDs()
		if len(ids) == 0 {
			rt.Skip("the service made no tasks")
		}
		for _, id := range ids {
			if rapid.Bool().Draw(rt, "assign") {
				w.apply(statemachine.Command{Kind: statemachine.CmdAssign, Task: id, Node: statemachine.NodeID(rapid.IntRange(1, 3).Draw(rt, "on"))})
			}
		}
		for range 8 {
			task := *st.Task(ids[rapid.IntRange(0, len(ids)-1).Draw(rt, "task")])
			// Fields the applies rarely set, drawn over what the state has.
			task.Node = statemachine.NodeID(rapid.SampledFrom([]uint32{0, 1, 2, 3, 9, uint32(task.Node)}).Draw(rt, "node"))
			task.Status.ExitCode = rapid.SampledFrom([]int32{0, 0, 1, -1, 137, -2147483648}).Draw(rt, "exit")
			task.SetMessage(name(rt, "message"))
			task.Status.Timestamp = rapid.SampledFrom([]int64{0, 1, 1_700_000_000_123_456_789, 1_700_000_000e9, -1e18, 1<<63 - 1}).Draw(rt, "at")
			task.Desired = statemachine.DesiredState(rapid.IntRange(0, 3).Draw(rt, "desired"))
			task.Status.State = statemachine.TaskState(rapid.IntRange(0, 12).Draw(rt, "state"))
			atts := append([]statemachine.Attachment(nil), task.Attachments...)
			for i := range atts {
				atts[i].Released = rapid.Bool().Draw(rt, "released")
			}
			if rapid.IntRange(0, 4).Draw(rt, "stray address") == 0 {
				atts = append(atts, statemachine.Attachment{Network: 7, Addr: rapid.Uint32().Draw(rt, "addr")})
			}
			task.Attachments = atts
			typ := rapid.SampledFrom([]string{"state", "assignment", "desired", "released"}).Draw(rt, "type")
			group, raft := rapid.IntRange(0, 300).Draw(rt, "group"), rapid.Uint64().Draw(rt, "raft")

			var ct client.Task
			renderTaskTo(&ct, st, &task, false)
			ev := client.Event{Group: group, Raft: raft, Topic: "task", Type: typ, Key: ct.ID, Task: &ct}
			var want bytes.Buffer
			if err := jsoncodec.NewEncoder(&want).Encode(ev); err != nil {
				rt.Fatal(err)
			}
			std, err := json.Marshal(ev)
			if err != nil {
				rt.Fatal(err)
			}
			if !bytes.Equal(want.Bytes(), append(std, '\n')) {
				rt.Fatalf("the codec and encoding/json differ:\n%s%s", want.Bytes(), std)
			}
			for _, a := range task.Attachments {
				if got, want := string(control.AppendAttachmentAddr(nil, st, a)), control.AttachmentAddr(st, a); got != want {
					rt.Fatalf("address %q, want %q", got, want)
				}
			}
			got, ok := appendTaskEvent([]byte("prefix"), group, raft, typ, st, &task)
			if !ok {
				general++
				if string(got) != "prefix" {
					rt.Fatalf("a line not written straight left %q", got)
				}
				continue
			}
			straight++
			if !bytes.Equal(got[len("prefix"):], want.Bytes()) {
				rt.Fatalf("written straight:\n%s\nthe codec:\n%s", got[len("prefix"):], want.Bytes())
			}
		}
	})
}
