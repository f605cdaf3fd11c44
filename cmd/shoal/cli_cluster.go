package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"shoal/api/client"
	"shoal/statemachine"
)

func newNodeCmd() *cobra.Command {
	o := &cliOptions{}
	cmd := &cobra.Command{Use: "node", Short: "Manage nodes"}
	addClientFlags(cmd, o)
	ls := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List nodes", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(o.format); err != nil {
				return err
			}
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				l, _, err := c.Nodes(ctx, nil)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				switch {
				case o.format == "json":
					return printJSON(w, l.Items)
				case o.quiet:
					for _, n := range l.Items {
						fmt.Fprintln(w, n.ID)
					}
					return nil
				}
				var rows [][]string
				for _, n := range l.Items {
					rows = append(rows, []string{strconv.Itoa(int(n.ID)), n.Name, titleCase(n.Status),
						titleCase(n.Availability), strconv.Itoa(n.Tasks), labels(n.Labels)})
				}
				return table(w, []string{"ID", "HOSTNAME", "STATUS", "AVAILABILITY", "TASKS", "LABELS"}, rows)
			})
		},
	}
	ls.Flags().StringVar(&o.format, "format", "table", "table or json")
	ls.Flags().BoolVarP(&o.quiet, "quiet", "q", false, "only IDs")
	inspect := &cobra.Command{
		Use: "inspect NODE", Short: "Show a node (ID, hostname or a unique prefix of either) as JSON", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				n, err := resolveNode(ctx, c, args[0])
				if err != nil {
					return err
				}
				id := nodeID(n)
				if n, err = c.Node(ctx, id); err != nil {
					return nodeErr(args[0], id, err)
				}
				return printJSON(cmd.OutOrStdout(), n)
			})
		},
	}
	var avail string
	var addLabels, rmLabels []string
	update := &cobra.Command{
		Use: "update NODE", Short: "Change a node's availability or labels (NODE: ID, hostname or a unique prefix)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("availability") && len(addLabels) == 0 && len(rmLabels) == 0 {
				return fmt.Errorf("nothing to change: pass --availability, --label-add or --label-rm")
			}
			if cmd.Flags().Changed("availability") {
				if err := oneOf("--availability", avail, "active", "pause", "drain"); err != nil {
					return err
				}
			}
			for _, kv := range addLabels {
				if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
					return fmt.Errorf("--label-add %q is not KEY=VALUE", kv)
				}
			}
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				n, err := resolveNode(ctx, c, args[0])
				if err != nil {
					return err
				}
				for _, k := range rmLabels {
					if _, ok := n.Labels[k]; !ok {
						have := slices.Sorted(maps.Keys(n.Labels))
						return fmt.Errorf("--label-rm %q: node %q has no label %s (its labels: %s)", k, args[0], k, cmp.Or(strings.Join(have, ", "), "none"))
					}
				}
				var u client.NodeUpdate
				if cmd.Flags().Changed("availability") {
					u.Availability = &avail
				}
				if len(addLabels) > 0 || len(rmLabels) > 0 {
					ls := map[string]string{}
					for k, v := range n.Labels {
						ls[k] = v
					}
					for _, kv := range addLabels {
						k, v, _ := strings.Cut(kv, "=")
						ls[k] = v
					}
					for _, k := range rmLabels {
						delete(ls, k)
					}
					u.Labels = &ls
				}
				id := nodeID(n)
				if n, err = c.UpdateNode(ctx, id, u); err != nil {
					return nodeErr(args[0], id, err)
				}
				fmt.Fprintln(cmd.OutOrStdout(), n.ID)
				return nil
			})
		},
	}
	update.Flags().StringVar(&avail, "availability", "", "active, pause or drain")
	update.Flags().StringArrayVar(&addLabels, "label-add", nil, "add or change a label KEY=VALUE (repeatable)")
	update.Flags().StringArrayVar(&rmLabels, "label-rm", nil, "remove a label (repeatable)")
	rm := &cobra.Command{
		Use: "rm NODE", Aliases: []string{"remove"}, Short: "Remove a down node (NODE: ID, hostname or a unique prefix)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				n, err := resolveNode(ctx, c, args[0])
				if err != nil {
					return err
				}
				if err := c.RemoveNode(ctx, nodeID(n)); err != nil {
					return nodeErr(args[0], nodeID(n), err)
				}
				fmt.Fprintln(cmd.OutOrStdout(), args[0])
				return nil
			})
		},
	}
	cmd.AddCommand(ls, inspect, update, rm)
	return cmd
}

func labels(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func newNetworkCmd() *cobra.Command {
	o := &cliOptions{}
	cmd := &cobra.Command{Use: "network", Short: "Manage networks"}
	addClientFlags(cmd, o)
	var subnet string
	var reserved []string
	create := &cobra.Command{
		Use: "create NAME --subnet CIDR", Short: "Create a network", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				n, err := c.CreateNetwork(ctx, client.NetworkSpec{Name: args[0], Subnet: subnet, Reserved: reserved})
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), n.Spec.Name)
				return nil
			})
		},
	}
	create.Flags().StringVar(&subnet, "subnet", "", "the network's addresses in CIDR form, e.g. 10.0.0.0/24 (required)")
	create.Flags().StringArrayVar(&reserved, "reserve", nil, "an address or range first-last never handed out (repeatable)")
	_ = create.MarkFlagRequired("subnet")
	ls := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List networks", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(o.format); err != nil {
				return err
			}
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				l, err := c.Networks(ctx)
				if err != nil {
					return err
				}
				if o.format == "json" {
					return printJSON(cmd.OutOrStdout(), l.Items)
				}
				var rows [][]string
				for _, n := range l.Items {
					rows = append(rows, []string{strconv.Itoa(int(n.ID)), n.Spec.Name, n.Spec.Subnet, strconv.Itoa(n.Size),
						strconv.Itoa(n.Free), strconv.Itoa(n.Held), strconv.Itoa(n.Quarantined)})
				}
				return table(cmd.OutOrStdout(), []string{"ID", "NAME", "SUBNET", "SIZE", "FREE", "HELD", "QUARANTINED"}, rows)
			})
		},
	}
	ls.Flags().StringVar(&o.format, "format", "table", "table or json")
	inspect := &cobra.Command{
		Use: "inspect NAME", Short: "Show a network as JSON", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				n, err := c.Network(ctx, args[0])
				if err != nil {
					return err
				}
				return printJSON(cmd.OutOrStdout(), n)
			})
		},
	}
	rm := &cobra.Command{
		Use: "rm NAME", Aliases: []string{"remove"}, Short: "Remove an unused network", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				if err := c.RemoveNetwork(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), args[0])
				return nil
			})
		},
	}
	cmd.AddCommand(create, ls, inspect, rm)
	return cmd
}

func newClusterCmd() *cobra.Command {
	o := &cliOptions{}
	cmd := &cobra.Command{Use: "cluster", Short: "Show or change the cluster settings"}
	addClientFlags(cmd, o)
	inspect := &cobra.Command{
		Use: "inspect", Short: "Show the cluster settings as JSON", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				s, err := c.ClusterSettings(ctx)
				if err != nil {
					return err
				}
				return printJSON(cmd.OutOrStdout(), s)
			})
		},
	}
	var limit int
	update := &cobra.Command{
		Use: "update", Short: "Change cluster settings every replica applies alike", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("task-history-limit") {
				return fmt.Errorf("nothing to change: pass --task-history-limit")
			}
			if limit < 1 || limit > statemachine.MaxTaskHistoryLimit {
				return fmt.Errorf("--task-history-limit %d is out of range: give 1 to %d tasks per slot (the running one counts)", limit, statemachine.MaxTaskHistoryLimit)
			}
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				s, err := c.UpdateClusterSettings(ctx, client.ClusterSettingsUpdate{TaskHistoryLimit: &limit})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "task history limit: %d\n", s.TaskHistoryLimit)
				return nil
			})
		},
	}
	update.Flags().IntVar(&limit, "task-history-limit", 0, "the most tasks each slot keeps, counting the running one (1-100; default 5); older finished tasks are deleted, at once when lowered")
	cmd.AddCommand(inspect, update)
	return cmd
}

func newStatusCmd() *cobra.Command {
	o := &cliOptions{}
	cmd := &cobra.Command{
		Use: "status", Short: "Show the cluster's managers, groups and counts", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(o.format); err != nil {
				return err
			}
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				st, err := c.Status(ctx)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if o.format == "json" {
					return printJSON(w, st)
				}
				lead := statusLead(st)
				fmt.Fprintf(w, "replica %d (%s): %d services, %d tasks, %d nodes\n", st.Replica, lead, st.Services, st.Tasks, st.Nodes)
				var rows [][]string
				for _, m := range st.Managers {
					rows = append(rows, []string{strconv.FormatUint(m.Replica, 10), m.API})
				}
				if err := table(w, []string{"MANAGER", "API"}, rows); err != nil {
					return err
				}
				fmt.Fprintf(w, "task history limit: %d (cluster setting)\n", st.Settings.TaskHistoryLimit)
				fmt.Fprintf(w, "failover grace: %s, orphan timeout: %s (replica %d's serve flags, used while it leads)\n",
					time.Duration(st.Monitor.FailoverGrace), time.Duration(st.Monitor.OrphanTimeout), st.Replica)
				rows = nil
				for _, g := range st.Groups {
					rows = append(rows, []string{strconv.Itoa(g.Group), strconv.FormatUint(g.Leader, 10),
						strconv.FormatUint(g.AppliedIndex, 10), strconv.Itoa(g.Services), strconv.Itoa(g.Tasks)})
				}
				return table(w, []string{"GROUP", "LEADER", "APPLIED", "SERVICES", "TASKS"}, rows)
			})
		},
	}
	addClientFlags(cmd, o)
	cmd.Flags().StringVar(&o.format, "format", "table", "table or json")
	return cmd
}

// statusLead says whether the answering replica leads the cluster group,
// and which replica does, since when it knows.
func statusLead(st client.Status) string {
	since := ""
	if t, err := time.Parse(time.RFC3339Nano, st.LeaderSince); err == nil {
		since = " since " + t.Local().Format("2006-01-02 15:04:05")
	}
	switch {
	case st.Leading:
		return "leading: true" + strings.Replace(since, " since", ", since", 1)
	case st.Leader == 0:
		return "leading: false; no leader known"
	default:
		return fmt.Sprintf("leading: false; leader: replica %d%s", st.Leader, since)
	}
}
