package api

import (
	"sync"

	"github.com/valyala/fasthttp"

	"shoal/wire"
)

// agentAssignments is the assignments long poll: it decodes the request,
// checks the caller, asks the assignment stream (control.Stream) and
// encodes its answer in frames under the size cap.
func (s *Server) agentAssignments(ctx *fasthttp.RequestCtx, _ []string) error {
	return s.agentHandler(func(ctx *fasthttp.RequestCtx) error {
		req := assignRequests.Get().(*wire.AssignmentsRequest)
		defer assignRequests.Put(req)
		*req = wire.AssignmentsRequest{Cursor: req.Cursor[:0]} // decoded into the last one's room
		if e := decodeWire(ctx, req); e != nil {
			return e
		}
		var err error
		if req.NodeID, err = s.callerNode(ctx, req.NodeID); err != nil {
			return err
		}
		a, err := s.stream.Assignments(s.ctx, req)
		if err != nil {
			return err
		}
		if a.Kind != wire.FrameComplete {
			err = s.wireReply(ctx, a) // one frame: SplitComplete splits only a COMPLETE
			s.stream.Release(a)       // written: its room goes to the next answer
			return err
		}
		return s.wireReply(ctx, frames(a)...)
	})(ctx, nil)
}

// assignRequests holds decoded poll requests, their cursors' room with
// them: the stream keeps nothing of a request once it answered it (what
// it remembers of the cursor it copies).
var assignRequests = sync.Pool{New: func() any { return new(wire.AssignmentsRequest) }}

// frames splits a under the frame size cap.
func frames(a *wire.Assignments) []wire.Message {
	parts := wire.SplitComplete(a, wire.MaxFrame)
	out := make([]wire.Message, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out
}
