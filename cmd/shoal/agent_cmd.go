package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"shoal/agent"
)

// agentOptions are the flags of `shoal agent`.
type agentOptions struct {
	join     string   // ADDR[,ADDR...]
	dataDir  string   // node ID, local state, task logs
	labels   []string // k=v
	hostname string
	token    string // the worker join token (first start with TLS)
	insecure bool   // plain HTTP to managers started with --insecure
	// stopOnExit stops every task process when the agent exits (serve
	// --dev); a real agent leaves them to the next agent run.
	stopOnExit bool
}

func newAgentCmd() *cobra.Command {
	var o agentOptions
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a node agent: join the managers and run the tasks they assign to this node",
		Long: `Run a node agent until SIGINT or SIGTERM.

The agent joins the managers given by --join (any of them; it learns the
rest), keeps its node ID and local state in --data-dir (the same node after
a restart; one agent per data directory), and runs its tasks as processes,
their output under DATA-DIR/logs/TASK-ID/. Task processes outlive the agent:
an agent started again on the same data directory re-attaches to them.

On its first start it presents the worker join token (--token, or
SHOAL_JOIN_TOKEN; print it with "shoal token worker"): it checks the
managers' CA against the token, obtains its node certificate (the manager
assigns the node ID) and keeps it in DATA-DIR/tls, renewing it at 50-80%
of its lifetime. A refused token is an error, not retried.

  shoal agent --join 127.0.0.1:7701,127.0.0.1:7702 --data-dir /var/lib/shoal-agent --token SHOAL-1-... --label zone=a`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("token") {
				o.token = os.Getenv("SHOAL_JOIN_TOKEN")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			err := runAgent(ctx, o, cmd.ErrOrStderr())
			if err != nil && ctx.Err() != nil && err == context.Cause(ctx) {
				// Stopped by SIGINT or SIGTERM, as asked: a clean exit.
				// (The signal is the context's cause, which the agent
				// hands back as the reason it stopped.)
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.join, "join", "", "manager API addresses, comma-separated (host:port)")
	f.StringVar(&o.dataDir, "data-dir", "", "the agent's data directory")
	f.StringArrayVar(&o.labels, "label", nil, "a node label k=v (repeatable)")
	f.StringVar(&o.hostname, "hostname", "", "the node's name (default: the machine's hostname)")
	// No default from the environment: --help would print the secret.
	f.StringVar(&o.token, "token", "", "the worker join token, SHOAL-1-... (env SHOAL_JOIN_TOKEN; needed on the first start only)")
	f.BoolVar(&o.insecure, "insecure", false, "plain HTTP, no certificate: for managers started with --insecure")
	_ = cmd.MarkFlagRequired("join")
	_ = cmd.MarkFlagRequired("data-dir")
	return cmd
}

// runAgent runs an agent with a process executor and a pebble store in
// o.dataDir until ctx ends. `serve --dev` uses it too.
func runAgent(ctx context.Context, o agentOptions, logOut io.Writer) error {
	addrs := splitAddrs(o.join)
	if len(addrs) == 0 {
		return errors.New("--join needs at least one manager address (host:port)")
	}
	for _, a := range addrs {
		// host:port, or a URL's http(s)://host:port; a missing port would
		// dial port 80 for ever.
		hostPort := strings.TrimPrefix(strings.TrimPrefix(a, "https://"), "http://")
		if _, port, err := net.SplitHostPort(hostPort); err != nil || port == "" {
			return fmt.Errorf("--join %q: give a manager's API address as host:port", a)
		}
	}
	labels := map[string]string{}
	for _, l := range o.labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return fmt.Errorf("--label %q: want key=value", l)
		}
		labels[k] = v
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelInfo}))

	release, err := agent.LockDataDir(o.dataDir)
	if err != nil {
		return fmt.Errorf("--data-dir %s: %w", o.dataDir, err)
	}
	defer release()
	store, err := agent.OpenPebbleStore(filepath.Join(o.dataDir, "state"))
	if err != nil {
		return err
	}
	defer store.Close()
	exec, err := agent.NewProcessExecutor(agent.ProcessConfig{DataDir: o.dataDir, Logger: log})
	if err != nil {
		return err
	}
	defer exec.Close()
	node := agent.DescribeNode(o.hostname, labels, version)
	mgr, renew, err := agentClient(ctx, o, addrs, node, store, log)
	if err != nil {
		return err
	}
	if renew != nil {
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := renew.Run(rctx); err != nil {
				log.Error("agent: certificate renewal stopped", "err", err)
			}
		}()
		defer func() { cancel(); <-done }()
	}
	log.Info("agent: starting", "join", addrs, "data_dir", o.dataDir, "pid", os.Getpid(), "tls", renew != nil)
	return agent.Run(ctx, agent.Config{
		Manager:    mgr,
		Executor:   exec,
		Store:      store,
		Node:       node,
		Logger:     log,
		StopOnExit: o.stopOnExit,
	})
}
