package api

import (
	"bytes"
	"fmt"
	"mime"

	"github.com/valyala/fasthttp"

	"shoal/wire"
)

// The agent endpoints speak two dialects of one protocol: binary frames
// (Content-Type application/x-shoal-wire; what Shoal's agents send) and
// JSON (application/json; for curl and for people writing other agents),
// with the same checks, authorization and limits. The request's
// Content-Type picks the dialect of the request; the answer comes in the
// request's dialect, or in JSON when Accept asks for application/json. A
// request with neither Content-Type is answered 415, in JSON.

const jsonContentType = "application/json"

// dialectKey holds the answer's dialect, bodyKey the request body's: true
// for JSON.
const (
	dialectKey = "shoal.agent.json"
	bodyKey    = "shoal.agent.body.json"
)

// settleDialect reads Content-Type and Accept and records the dialect.
func settleDialect(ctx *fasthttp.RequestCtx) *wire.Error {
	raw := ctx.Request.Header.ContentType()
	// What agents send is taken as ParseMediaType would give it, without
	// the string it makes and parses at every request.
	var ct string
	switch {
	case string(raw) == wireContentType:
		ct = wireContentType
	case string(raw) == jsonContentType:
		ct = jsonContentType
	default:
		ct, _, _ = mime.ParseMediaType(string(raw))
	}
	accept := ctx.Request.Header.Peek("Accept")
	switch ct {
	case wireContentType:
		ctx.SetUserValue(dialectKey, bytes.Contains(accept, []byte(jsonContentType)))
		return nil
	case jsonContentType:
		ctx.SetUserValue(dialectKey, true)
		ctx.SetUserValue(bodyKey, true)
		return nil
	}
	ctx.SetUserValue(dialectKey, true)
	return &wire.Error{Code: wire.CodeUnsupportedMedia,
		Message: fmt.Sprintf("Content-Type %q is neither %s (binary frames) nor %s", ct, wireContentType, jsonContentType)}
}

// bodyJSON: the request body is JSON.
func bodyJSON(ctx *fasthttp.RequestCtx) bool {
	v, _ := ctx.UserValue(bodyKey).(bool)
	return v
}

// speaksJSON: the answer goes in JSON.
func speaksJSON(ctx *fasthttp.RequestCtx) bool {
	v, _ := ctx.UserValue(dialectKey).(bool)
	return v
}

// joinFrames makes one message of an answer's frames: the parts of a
// COMPLETE sent as several frames, reassembled as the agent client does.
func joinFrames(msgs []wire.Message) wire.Message {
	if len(msgs) == 1 {
		return msgs[0]
	}
	first, ok := msgs[0].(*wire.Assignments)
	if !ok {
		return msgs[0]
	}
	whole := *first
	for _, m := range msgs[1:] {
		whole.Join(m.(*wire.Assignments))
	}
	return &whole
}

// copyMessage sets *dst to *src, both of one message type.
func copyMessage(dst, src wire.Message) error {
	switch d := dst.(type) {
	case *wire.SessionRequest:
		*d = *src.(*wire.SessionRequest)
	case *wire.Heartbeat:
		*d = *src.(*wire.Heartbeat)
	case *wire.AssignmentsRequest:
		*d = *src.(*wire.AssignmentsRequest)
	case *wire.StatusBatch:
		*d = *src.(*wire.StatusBatch)
	case *wire.SyncRequest:
		*d = *src.(*wire.SyncRequest)
	default:
		return fmt.Errorf("%s has no JSON form at this endpoint", dst.Type())
	}
	return nil
}
