package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"shoal/statemachine"
)

// A replica alone leads every group long before its election timeout
// could fire, on first start and on a restart with entries to replay.
func TestReplicaAloneLeadsAtOnce(t *testing.T) {
	cfg := testConfig(4)
	cfg.DataDir = t.TempDir()
	cfg.RTT = 50 * time.Millisecond
	cfg.ElectionRTT = 400 // 20 s: the earliest a group could elect on its own
	for start := range 2 {
		e, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = e.WaitReady(ctx)
		cancel()
		if err != nil {
			e.Close()
			t.Fatalf("start %d: not every group led 10s after the start: %v", start+1, err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		_, err = e.Submit(ctx, statemachine.Command{Kind: statemachine.CmdCreateService,
			Spec: &statemachine.ServiceSpec{Name: fmt.Sprintf("web%d", start), Replicas: 1}})
		cancel()
		e.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}
