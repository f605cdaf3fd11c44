package api

import (
	"testing"

	"shoal/statemachine"
	"shoal/wire"
)

// owners is a fake of the groups' task tables for foreignReport: the node
// of each task, and how many reads each group took.
type owners struct {
	node  map[statemachine.TaskID]statemachine.NodeID
	reads map[int]int
}

func (o *owners) read(g int, fn func(owner func(statemachine.TaskID) statemachine.NodeID)) {
	o.reads[g]++
	fn(func(id statemachine.TaskID) statemachine.NodeID { return o.node[id] })
}

func task(g int, n uint64) statemachine.TaskID { return statemachine.TaskID(uint64(g)<<48 | n) }

// A status batch is checked with one read per group it touches, and the
// refusal names the batch's first report of a task on another node,
// whichever group it is in; unknown tasks and groups out of range pass.
func TestForeignReportReadsEachGroupOnce(t *testing.T) {
	o := &owners{node: map[statemachine.TaskID]statemachine.NodeID{
		task(1, 1): 5, task(1, 2): 9, task(2, 1): 5, task(3, 1): 9, task(3, 2): 5,
	}, reads: map[int]int{}}
	reports := []wire.StatusReport{{Task: task(1, 1)}, {Task: task(3, 2)}, {Task: task(2, 1)}, {Task: task(7, 1)},
		{Task: task(3, 1)}, {Task: task(2, 9)}, {Task: task(1, 2)}}
	if i := foreignReport(5, reports, 3, o.read); i != 4 {
		t.Fatalf("first foreign report %d, want 4 (task %d on node 9)", i, task(3, 1))
	}
	if o.reads[1] != 1 || o.reads[2] != 1 || o.reads[3] != 1 || len(o.reads) != 3 {
		t.Fatalf("reads per group %v, want one each of groups 1-3", o.reads)
	}
	if i := foreignReport(5, reports[:4], 3, o.read); i != -1 {
		t.Fatalf("first foreign report %d of a batch of node 5's own, want none", i)
	}
	if i := foreignReport(9, reports, 3, o.read); i != 0 {
		t.Fatalf("node 9: first foreign report %d, want 0", i)
	}
}

// BenchmarkOwnTasksCheck is the check of a status batch of 100 reports
// spread over 8 groups (reads/op: the group reads it takes; each is a read
// of the group's state under its lock).
func BenchmarkOwnTasksCheck(b *testing.B) {
	o := &owners{node: map[statemachine.TaskID]statemachine.NodeID{}, reads: map[int]int{}}
	var reports []wire.StatusReport
	for i := range 100 {
		id := task(1+i%8, uint64(i))
		o.node[id] = 5
		reports = append(reports, wire.StatusReport{Task: id})
	}
	for b.Loop() {
		if i := foreignReport(5, reports, 8, o.read); i != -1 {
			b.Fatal(i)
		}
	}
	n := 0
	for _, r := range o.reads {
		n += r
	}
	b.ReportMetric(float64(n)/float64(b.N), "reads/op")
}
