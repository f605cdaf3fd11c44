package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"shoal/internal/clock"
	"shoal/loadgen/fleet"
)

// newLoadgenWorkerCmd is `shoal loadgen fleet`: a fleet worker on another
// host, which runs a share of a loadgen's simulated agents for it.
func newLoadgenWorkerCmd() *cobra.Command {
	var (
		coordinator, token, agentLog string
		wait, offset                 time.Duration
	)
	cmd := &cobra.Command{
		Use:   "fleet --coordinator HOST:PORT --token TOKEN",
		Short: "Run a share of a loadgen's simulated agents on this host (a fleet worker)",
		Long: `Connect to a loadgen started with --fleet-workers N (the coordinator), take
the share of its simulated agents it hands out, and run them against the
cluster's managers from this host until the run ends. The token is the one
the coordinator printed (or wrote to --fleet-token-file); a worker of another
run, or with a wrong token, is refused with a line saying which.

  shoal loadgen fleet --coordinator 10.0.0.5:7790 --token shoal-lg-...

Workers can run as a Shoal service on another cluster:

  shoal service create lg-fleet --replicas 8 --restart-condition on-failure -- \
      shoal loadgen fleet --coordinator 10.0.0.5:7790 --token shoal-lg-...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if coordinator == "" {
				return errors.New("--coordinator is required: the loadgen's address (host:port of its --fleet-listen)")
			}
			if token == "" {
				token = os.Getenv("SHOAL_LOADGEN_TOKEN")
			}
			tok, err := fleet.ParseToken(token)
			if err != nil {
				return fmt.Errorf("--token: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runFleetWorker(ctx, cmd, coordinator, tok, agentLog, wait, offset)
		},
	}
	f := cmd.Flags()
	f.StringVar(&coordinator, "coordinator", "", "the loadgen's address for its workers, host:port")
	f.StringVar(&token, "token", "", "the run's worker token, as the loadgen printed it (env SHOAL_LOADGEN_TOKEN)")
	f.StringVar(&agentLog, "agent-log", "", "write the simulated agents' warnings and errors to this file (default: discarded)")
	f.DurationVar(&wait, "wait", 5*time.Minute, "keep trying to reach the coordinator this long (it may not be listening yet)")
	f.DurationVar(&offset, "clock-offset", 0, "testing: move this worker's clock by this much, to check that the loadgen measures and corrects it")
	_ = f.MarkHidden("clock-offset")
	return cmd
}

func runFleetWorker(ctx context.Context, cmd *cobra.Command, addr string, tok fleet.Token, agentLog string, wait, offset time.Duration) error {
	out := cmd.ErrOrStderr()
	host, _ := os.Hostname()
	var clk clock.Clock = clock.Real{}
	if offset != 0 {
		clk = clock.Offset{D: offset}
	}
	deadline := time.Now().Add(wait)
	var conn *fleet.Conn
	for {
		var err error
		conn, err = fleet.Dial(ctx, addr, tok, host, os.Getpid())
		if err == nil {
			break
		}
		var refused *fleet.RefusedError
		if errors.As(err, &refused) || ctx.Err() != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w (tried for %s)", err, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	defer conn.Close()
	cfg, err := conn.Config(clk.Now)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "shoal loadgen fleet: worker %d of run %s: running %d simulated agents (from %d) against %v\n",
		conn.ID, tok.Run, cfg.Agents, cfg.First, cfg.Managers)
	fc := fleet.Config{Clock: clk}
	if agentLog != "" {
		f, err := os.OpenFile(agentLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		fc.Logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	// Stopped (SIGTERM, Ctrl-C): the connections close, the agents stop,
	// and the coordinator counts this worker as lost.
	go func() { <-ctx.Done(); conn.Close() }()
	ctl, obs := conn.Streams()
	if err := fleet.Serve(ctx, cfg, ctl, ctl, obs, fc); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return errors.New("shoal loadgen fleet: stopped before the run ended")
	}
	fmt.Fprintln(out, "shoal loadgen fleet: the run ended")
	return nil
}
