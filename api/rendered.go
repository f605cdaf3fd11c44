package api

import (
	"shoal/api/client"
	"shoal/statemachine"
)

// RenderTask renders t, as stored in st, the way the task endpoints and
// the event stream send it (without its history): for a caller that must
// see what a user sees without a server, such as the deterministic
// simulation feeding the loadgen's checker.
func RenderTask(st *statemachine.State, t *statemachine.Task) client.Task {
	return renderTask(st, t, false)
}

// RenderNode renders n the way the node endpoints and the event stream
// send it (without its task count), for the same callers as RenderTask.
func RenderNode(n *statemachine.Node) client.Node { return renderNode(n) }

// RenderService renders svc, as stored in group g's state st, the way the
// service endpoints and the event stream send it, for the same callers as
// RenderTask.
func RenderService(g int, st *statemachine.State, svc *statemachine.Service) client.Service {
	return renderService(g, st, svc)
}
