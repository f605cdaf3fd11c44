package manager

import (
	"context"
	"time"

	"shoal/engine/duty"
	"shoal/statemachine"
)

// monitorFront is the node monitor duty as the API's agent endpoints see
// it (api.Monitor): a heartbeat answers with the node's TTL, and the
// timers are the two the status document shows.
type monitorFront struct{ *duty.MonitorDuty }

func (m monitorFront) Heartbeat(ctx context.Context, node statemachine.NodeID, now time.Time) (time.Duration, error) {
	b, err := m.MonitorDuty.Heartbeat(ctx, node, now)
	return b.TTL, err
}

func (m monitorFront) Timers() (failoverGrace, orphanTimeout time.Duration) {
	c := m.Config()
	return c.FailoverGrace, c.OrphanTimeout
}

// placementFront is the scheduler driver as the API's task listings see
// it (api.Placement): why its last run left each service's tasks pending.
type placementFront struct{ d *duty.Driver }

func (p placementFront) Unplaced() map[string]error {
	us := p.d.Unschedulable()
	out := make(map[string]error, len(us))
	for _, u := range us {
		out[u.Name] = u.Err
	}
	return out
}
