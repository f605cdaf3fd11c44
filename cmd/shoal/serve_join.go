package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"shoal/api/client"
	"shoal/engine"
)

// joinsMembership reports whether this start adds the replica to a running
// cluster's membership: --join without --peers, on a data directory that
// never started (a restart takes everything from the directory).
func joinsMembership(o serveOptions, peers map[uint64]string) (bool, error) {
	if o.join == "" {
		return false, nil
	}
	started, err := engine.Started(o.dataDir)
	if err != nil || started {
		return false, err
	}
	if len(peers) > 0 {
		if _, ok := peers[o.id]; !ok {
			return false, fmt.Errorf("--peers does not list this replica (%d): initial members are all listed in --peers; a replica joining a running cluster takes --join and no --peers", o.id)
		}
		return false, nil // an initial member: --join only fetches its certificate
	}
	if o.raftAddr == "" {
		return false, errors.New("--join needs --raft-addr: the host:port on which the other replicas reach this replica's Raft")
	}
	return true, nil
}

// joinInsecure asks a running manager (without TLS) to add this replica
// to the membership of every group, waiting while none answers.
func joinInsecure(ctx context.Context, o serveOptions, out io.Writer) error {
	addrs := splitAddrs(o.join)
	said := false
	for wait := 200 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		var err error
		for _, addr := range addrs {
			var c *client.Client
			if c, err = client.New(addr); err != nil {
				return fmt.Errorf("--join: %w", err)
			}
			rctx, cancel := context.WithTimeout(ctx, 45*time.Second)
			_, err = c.AddReplica(rctx, client.Replica{ID: o.id, RaftAddr: o.raftAddr, APIAddr: o.apiAddr})
			cancel()
			var ae *client.APIError
			switch {
			case err == nil:
				fmt.Fprintf(out, "shoal: joined the cluster at %s as replica %d (Raft %s): added to every group\n", addr, o.id, o.raftAddr)
				return nil
			case errors.As(err, &ae) && ae.Status < http.StatusInternalServerError:
				return fmt.Errorf("the manager at %s refused the join: %s", addr, ae.ErrorBody.Error)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !said {
			fmt.Fprintf(out, "shoal: waiting for a manager to answer the join (%v); retrying\n", err)
			said = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}
