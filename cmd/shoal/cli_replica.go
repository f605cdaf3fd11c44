package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"shoal/api/client"
)

func newReplicaCmd() *cobra.Command {
	o := &cliOptions{}
	cmd := &cobra.Command{Use: "replica", Short: "Manage the manager replicas (the Raft membership of every group)"}
	addClientFlags(cmd, o)
	ls := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List the replicas and each group's members", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(o.format); err != nil {
				return err
			}
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				r, err := c.Replicas(ctx)
				if err != nil {
					return err
				}
				return printReplicas(cmd.OutOrStdout(), r, o.format)
			})
		},
	}
	ls.Flags().StringVar(&o.format, "format", "table", "table or json")
	rm := &cobra.Command{
		Use: "rm ID", Aliases: []string{"remove"}, Args: cobra.ExactArgs(1),
		Short: "Remove a replica from every group (to replace a lost one: then join a fresh replica with a new --id)",
		Long: `Remove a replica from the Raft membership of every group, so the others
no longer count it for a quorum. Use it for a replica whose machine or
data is lost; then start a replacement with a fresh data directory, a new
--id and --join. A removed ID can never join again. The last replica
cannot be removed, and the change needs a quorum of the current members.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil || id == 0 {
				return fmt.Errorf("replica ID %q: want a number, 1 or more (see `shoal replica ls`)", args[0])
			}
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				r, err := c.RemoveReplica(ctx, id)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed replica %d\n", id)
				return printReplicas(cmd.OutOrStdout(), r, "table")
			})
		},
	}
	cmd.AddCommand(ls, rm)
	return cmd
}

func printReplicas(w io.Writer, r client.Replicas, format string) error {
	if format == "json" {
		return printJSON(w, r)
	}
	groupsOf := map[uint64][]string{}
	for _, g := range r.Groups {
		for _, id := range g.Members {
			groupsOf[id] = append(groupsOf[id], strconv.Itoa(g.Group))
		}
	}
	var rows [][]string
	for _, rep := range r.Replicas {
		api := rep.APIAddr
		if api == "" {
			api = "-"
		}
		rows = append(rows, []string{strconv.FormatUint(rep.ID, 10), rep.RaftAddr, api, strings.Join(groupsOf[rep.ID], ",")})
	}
	return table(w, []string{"ID", "RAFT", "API", "GROUPS"}, rows)
}
