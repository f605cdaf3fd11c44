package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"shoal/api/client"
)

// newTokenCmd is `shoal token worker|manager [--rotate]`.
func newTokenCmd() *cobra.Command {
	o := &cliOptions{}
	var rotate, quiet bool
	cmd := &cobra.Command{
		Use:   "token worker|manager",
		Short: "Print (or rotate) the join token agents or managers join the cluster with",
		Long: `Print the join token of a role: agents join with the worker token
(shoal agent --token), replicas with the manager token (shoal serve --join
ADDR --token). --rotate replaces it for new joins; nodes that joined keep
their certificates. Needs the admin credential (--tls-dir or SHOAL_TLS_DIR).`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"worker", "manager"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "worker" && args[0] != "manager" {
				return fmt.Errorf("token %q: there is a worker token and a manager token", args[0])
			}
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				var d client.TokenDoc
				var err error
				if rotate {
					d, err = c.RotateToken(ctx, args[0])
				} else {
					d, err = c.ShowToken(ctx, args[0])
				}
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if quiet {
					fmt.Fprintln(w, d.Token)
					return nil
				}
				if rotate {
					fmt.Fprintf(w, "The %s join token was rotated; the old one no longer joins.\n", d.Role)
				}
				if d.Role == "worker" {
					fmt.Fprintf(w, "To add a node, run on it:\n\n    shoal agent --join %s --data-dir DIR --token %s\n\n", hostPort(c.Addr()), d.Token)
				} else {
					fmt.Fprintf(w, "To add a manager replica, start it with:\n\n    shoal serve --id N ... --join %s --token %s\n\n", hostPort(c.Addr()), d.Token)
				}
				for _, m := range d.Unsynced {
					fmt.Fprintf(w, "warning: the manager at %s could not be reached: it accepts the old token until a later rotation reaches it\n", m)
				}
				return nil
			})
		},
	}
	addClientFlags(cmd, o)
	cmd.Flags().BoolVar(&rotate, "rotate", false, "replace the token (new joins need the new one)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print the token alone")
	return cmd
}

// hostPort strips the scheme of a base URL.
func hostPort(base string) string {
	for _, p := range []string{"https://", "http://"} {
		if len(base) > len(p) && base[:len(p)] == p {
			return base[len(p):]
		}
	}
	return base
}
