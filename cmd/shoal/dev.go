package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// startDevAgent runs an agent in this process for `serve --dev`, with its
// data under the manager's data directory; the returned function stops it.
func startDevAgent(ctx context.Context, o serveOptions, apiAddr string, out io.Writer) (func(), error) {
	host, _ := os.Hostname()
	if host == "" {
		host = "dev"
	}
	ao := agentOptions{join: apiAddr, dataDir: filepath.Join(o.dataDir, "agent"), hostname: host, stopOnExit: true, insecure: true}
	if err := os.MkdirAll(ao.dataDir, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(o.dataDir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := runAgent(ctx, ao, logf); err != nil && ctx.Err() == nil {
			fmt.Fprintf(out, "shoal: dev agent stopped: %v (log: %s)\n", err, logf.Name())
		}
	}()
	// The suggested commands talk to the default address unless told
	// otherwise: on another, the first line tells them.
	where := ""
	if apiAddr != defaultAddr {
		where = "\n    export SHOAL_ADDR=" + apiAddr
	}
	fmt.Fprintf(out, `shoal: dev mode: one manager and an agent in this process, plain HTTP on loopback (no TLS)
  data:      %s
  agent log: %s
  try:%s
    bin/shoal service create web --replicas 3 -- sleep 1000
    bin/shoal service ps web
    bin/shoal node ls
`, o.dataDir, logf.Name(), where)
	return func() {
		cancel()
		<-done
		logf.Close()
	}, nil
}
