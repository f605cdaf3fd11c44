package engine

import (
	"context"

	"shoal/route"
)

// proposeRaw proposes raw bytes as one entry of a group, bypassing the
// encoder (the test hook for corrupt entries).
func (e *Engine) proposeRaw(ctx context.Context, group int, ent []byte) route.Outcome {
	w := &waiter{out: make([]route.Outcome, 1), done: make(chan struct{})}
	w.left.Store(1)
	p := e.props[group]
	p.mu.Lock()
	p.mu.inflight += len(ent)
	p.mu.entries++
	p.mu.Unlock()
	p.send(ent, []call{{w: w, enc: ent}}, len(ent), e.cfg.Clock.Now().Add(e.cfg.ProposeTimeout))
	select {
	case <-w.done:
		return w.out[0]
	case <-ctx.Done():
		return route.Outcome{Failed: ctx.Err()}
	}
}
