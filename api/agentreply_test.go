package api

import (
	"testing"

	"github.com/valyala/fasthttp"

	"shoal/statemachine"
	"shoal/wire"
)

// BenchmarkAgentReply: an INCREMENTAL of 10 tasks (two addresses each)
// written as the answer to an assignments poll, in the wire dialect, into
// a response reused from request to request as fasthttp reuses it.
func BenchmarkAgentReply(b *testing.B) {
	a := &wire.Assignments{Kind: wire.FrameIncremental, Last: true, AppliesTo: wire.Cursor{0, 10, 20, 30, 40},
		ResultsIn: wire.Cursor{0, 11, 20, 30, 40}, Seqs: []uint64{0, 5, 0, 0, 0}}
	for i := range 10 {
		a.Tasks = append(a.Tasks, wire.Assignment{Task: statemachine.TaskID(1<<48 | i), Service: "web", Slot: uint32(i),
			SpecVersion: 1, Desired: statemachine.DesiredRunning, State: statemachine.StateAssigned,
			Addresses: []wire.Address{{Network: "front", Addr: "10.1.0.7/16"}, {Network: "back", Addr: "10.2.0.7/16"}}})
	}
	var s Server
	var ctx fasthttp.RequestCtx
	b.ReportAllocs()
	for range b.N {
		ctx.Response.Reset()
		if err := s.wireReply(&ctx, frames(a)...); err != nil {
			b.Fatal(err)
		}
	}
}
