package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"shoal/api/client"
	"shoal/engine"
)

// joinsMembership reports whether this start adds the replica to a running
// cluster's membership: join addresses without peers, on a data directory
// that never started (a restart takes everything from the directory).
func joinsMembership(o ServeOptions) (bool, error) {
	if len(o.JoinAddrs) == 0 {
		return false, nil
	}
	started, err := engine.Started(o.DataDir)
	if err != nil || started {
		return false, err
	}
	if len(o.Peers) > 0 {
		if _, ok := o.Peers[o.ReplicaID]; !ok {
			return false, fmt.Errorf("--peers does not list this replica (%d): initial members are all listed in --peers; a replica joining a running cluster takes --join and no --peers", o.ReplicaID)
		}
		return false, nil // an initial member: --join only fetches its certificate
	}
	if o.RaftAddr == "" {
		return false, errors.New("--join needs --raft-addr: the host:port on which the other replicas reach this replica's Raft")
	}
	return true, nil
}

// joinGroups is the service group count a joining replica starts with,
// which the cluster checks against its own.
func joinGroups(o ServeOptions) int {
	if o.Groups > 0 {
		return o.Groups
	}
	return engine.DefaultGroups
}

// joinInsecure asks a running manager (without TLS) to add this replica
// to the membership of every group, waiting while none answers.
func joinInsecure(ctx context.Context, o ServeOptions, sayf func(string, ...any)) error {
	said := false
	for wait := 200 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		var err error
		for _, addr := range o.JoinAddrs {
			var c *client.Client
			if c, err = client.New(addr); err != nil {
				return fmt.Errorf("--join: %w", err)
			}
			rctx, cancel := context.WithTimeout(ctx, 45*time.Second)
			_, err = c.AddReplica(rctx, client.Replica{ID: o.ReplicaID, RaftAddr: o.RaftAddr, APIAddr: o.APIAddr, Groups: joinGroups(o)})
			cancel()
			var ae *client.APIError
			switch {
			case err == nil:
				sayf("joined the cluster at %s as replica %d (Raft %s): added to every group", addr, o.ReplicaID, o.RaftAddr)
				return nil
			case errors.As(err, &ae) && ae.Status < http.StatusInternalServerError:
				return fmt.Errorf("the manager at %s refused the join: %s", addr, ae.ErrorBody.Error)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !said {
			sayf("waiting for a manager to answer the join (%v); retrying", err)
			said = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}
