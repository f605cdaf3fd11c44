package loadgen

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"shoal/loadgen/fleet"
	"shoal/loadgen/report"
)

// Fleet workers on other hosts (loadgen/fleet, net.go): the loadgen is
// their coordinator. It listens before anything else starts (the workers
// can be started while the managers come up), waits for FleetWorkers of
// them once the managers are up, and runs FleetLocal agents in its own
// child processes and the rest on the workers.

// fleetHub is the coordinator's side of a run with workers.
type fleetHub struct {
	hub  *fleet.Hub
	lost atomic.Int64
}

// listenFleet opens the workers' listener and says how to start them.
func (r *run) listenFleet() error {
	if r.cfg.FleetWorkers <= 0 {
		return nil
	}
	h, err := fleet.Listen(r.cfg.FleetListen, func(format string, args ...any) { r.logf(format, args...) })
	if err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	r.workers = &fleetHub{hub: h}
	tok := h.Token().String()
	if r.cfg.FleetTokenFile != "" {
		if err := os.WriteFile(r.cfg.FleetTokenFile, []byte(tok+"\n"), 0o600); err != nil {
			h.Close()
			return fmt.Errorf("loadgen: --fleet-token-file: %w", err)
		}
	}
	r.logf("waiting for %d fleet workers on %s; start each with:\n    shoal loadgen fleet --coordinator %s --token %s",
		r.cfg.FleetWorkers, h.Addr(), advertised(r.cfg.FleetListen, h.Addr().String()), tok)
	return nil
}

// advertised is the address workers dial: the listen address as given,
// with the port the listener got.
func advertised(listen, got string) string {
	host, _, err := net.SplitHostPort(listen)
	_, port, err2 := net.SplitHostPort(got)
	if err != nil || err2 != nil || host == "" || host == "0.0.0.0" || host == "::" {
		return "THIS-HOST:" + port
	}
	return net.JoinHostPort(host, port)
}

// startAgents starts the simulated agents: in local child processes and,
// with workers, on them.
func (r *run) startAgents(ctx context.Context, bin string, cc fleet.ChildConfig, per int) (agents, error) {
	if r.workers == nil {
		return fleet.StartRemote(bin, cc, per, r.checker, r.cfg.Out)
	}
	wctx, cancel := context.WithTimeout(ctx, r.cfg.FleetWait)
	defer cancel()
	ws, err := r.workers.hub.Wait(wctx, r.cfg.FleetWorkers, func(in int) {
		r.logf("%d of %d fleet workers connected", in, r.cfg.FleetWorkers)
	})
	if err != nil {
		return nil, fmt.Errorf("loadgen: waited %s for the fleet workers (--fleet-wait): %w", r.cfg.FleetWait, err)
	}
	for _, w := range ws {
		r.logf("fleet worker %d: %s (%s), clock offset %+.3fms ± %.3fms", w.ID, w.Host, w.Remote,
			ms(w.Offset), ms(w.Bound))
	}
	local := min(r.cfg.FleetLocal, r.cfg.Agents)
	r.logf("starting %d simulated agents: %d in local processes, %d on %d fleet workers", r.cfg.Agents, local,
		r.cfg.Agents-local, len(ws))
	return fleet.StartFleet(bin, cc, per, local, ws, r.checker, r.cfg.Out, func(name string) {
		r.workers.lost.Add(1)
		r.logf("lost %s: its agents are gone with their processes; their nodes go down", name)
	})
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fleetReport adds the workers to the report (none: nothing).
func (r *run) fleetReport(rep *report.Report) {
	if r.workers == nil {
		return
	}
	f := &report.Fleet{WorkersLost: int(r.workers.lost.Load()),
		LatencyClock: "the managers' clocks (the agents' clocks do not enter them)",
		MergeOrder:   "by the workers' stamps corrected for their measured clock offsets"}
	if rf, ok := r.fleet.(*fleet.Remote); ok {
		f.LocalAgents = rf.LocalAgents()
		for _, w := range rf.Workers() {
			f.Workers = append(f.Workers, report.FleetWorker{ID: w.ID, Host: w.Host, Address: w.Remote, FirstAgent: w.First,
				Agents: w.Agents, CPUSeconds: w.CPUSeconds, ClockOffsetMs: ms(w.Offset), ClockErrorMs: ms(w.Bound), Lost: w.Lost})
		}
	}
	rep.Fleet = f
}
