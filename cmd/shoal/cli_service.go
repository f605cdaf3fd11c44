package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"shoal/api/client"
)

func newServiceCmd() *cobra.Command {
	o := &cliOptions{}
	cmd := &cobra.Command{Use: "service", Short: "Manage services"}
	addClientFlags(cmd, o)
	cmd.AddCommand(newServiceCreateCmd(o), newServiceLsCmd(o), newServicePsCmd(o), newServiceInspectCmd(o),
		newServiceScaleCmd(o), newServiceUpdateCmd(o), newServiceRollbackCmd(o), newServiceRmCmd(o),
		newServiceLogsCmd(o))
	return cmd
}

func newServiceCreateCmd(o *cliOptions) *cobra.Command {
	var f specFlags
	cmd := &cobra.Command{
		Use:   "create NAME [flags] -- COMMAND [ARGS...]",
		Short: "Create a service whose tasks run COMMAND",
		Example: `  shoal service create web --replicas 3 -- sleep 1000
  shoal service create api --network backend --env PORT=8080 -- ./server`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || cmd.ArgsLenAtDash() == 0 {
				return errors.New("give the service a name before --: shoal service create NAME [flags] -- COMMAND [ARGS...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			spec := client.ServiceSpec{Name: args[0], Command: args[1:]}
			if f.mode == "global" {
				spec.Mode = "global"
			} else if f.mode != "replicated" {
				return fmt.Errorf("--mode %q: use replicated or global", f.mode)
			}
			if spec.Mode == "global" && cmd.Flags().Changed("replicas") {
				return fmt.Errorf("--replicas does not apply to a global service (it runs one task per node)")
			}
			if err := f.apply(cmd, &spec, true); err != nil {
				return err
			}
			ctx, cancel := requestCtx(cmd)
			defer cancel()
			svc, idx, err := c.CreateService(ctx, spec)
			if err != nil {
				return userError(err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), svc.Spec.Name)
			if f.detach {
				return nil
			}
			return converge(cmd, c, svc.Spec.Name, idx, f.timeout)
		},
	}
	f.add(cmd, true)
	return cmd
}

func newServiceUpdateCmd(o *cliOptions) *cobra.Command {
	var f specFlags
	var image string
	cmd := &cobra.Command{
		Use:   "update NAME [flags] [-- COMMAND [ARGS...]]",
		Short: "Change a service; its tasks are replaced by a rolling update",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			changes := len(args) > 1
			cmd.LocalFlags().VisitAll(func(fl *pflag.Flag) {
				changes = changes || (fl.Changed && fl.Name != "detach" && fl.Name != "timeout")
			})
			if !changes {
				return fmt.Errorf("nothing to change: give the flags to change (shoal service update --help) or -- COMMAND [ARGS...]")
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			ctx, cancel := requestCtx(cmd)
			defer cancel()
			cur, _, err := c.Service(ctx, args[0], nil)
			if err != nil {
				return userError(err)
			}
			spec := cur.Spec
			if err := f.apply(cmd, &spec, false); err != nil {
				return err
			}
			if len(args) > 1 {
				spec.Command = args[1:]
			}
			if cmd.Flags().Changed("image") {
				spec.Image = image
			}
			svc, idx, err := c.UpdateService(ctx, spec, cur.ModifyIndex)
			if err != nil {
				return userError(err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), svc.Spec.Name)
			if f.detach {
				return nil
			}
			return converge(cmd, c, svc.Spec.Name, idx, f.timeout)
		},
	}
	f.add(cmd, false)
	cmd.Flags().StringVar(&image, "image", "", "image (opaque to Shoal; changing it replaces the tasks)")
	return cmd
}

func newServiceScaleCmd(o *cliOptions) *cobra.Command {
	var detach bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "scale NAME=REPLICAS [NAME=REPLICAS...]",
		Short: "Set the number of tasks of replicated services",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			// Every argument is checked before any service is scaled.
			type scaling struct {
				name string
				n    uint32
			}
			var todo []scaling
			for _, a := range args {
				name, n, ok := strings.Cut(a, "=")
				r, perr := strconv.ParseUint(n, 10, 32)
				if !ok || perr != nil || name == "" {
					return fmt.Errorf("%q: give NAME=REPLICAS, REPLICAS a whole number, 0 or more", a)
				}
				todo = append(todo, scaling{name, uint32(r)})
			}
			for _, sc := range todo {
				name, r := sc.name, sc.n
				ctx, cancel := requestCtx(cmd)
				svc, idx, err := c.Scale(ctx, name, r)
				cancel()
				if err != nil {
					return userError(err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s scaled to %d\n", svc.Spec.Name, r)
				if !detach {
					if err := converge(cmd, c, name, idx, timeout); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "return without waiting for convergence")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for convergence")
	return cmd
}

func newServiceRollbackCmd(o *cliOptions) *cobra.Command {
	var detach bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "rollback NAME",
		Short: "Return a service to its previous spec",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				svc, idx, err := c.Rollback(ctx, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), svc.Spec.Name)
				if detach {
					return nil
				}
				return converge(cmd, c, args[0], idx, timeout)
			})
		},
	}
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "return without waiting for convergence")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for convergence")
	return cmd
}

func newServiceRmCmd(o *cliOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME [NAME...]",
		Aliases: []string{"remove"},
		Short:   "Remove services (their tasks are stopped first)",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				// Each name is removed if it can be; the ones that could not
				// are said together, on one line, at the end.
				var failed []string
				for _, name := range args {
					if _, _, err := c.RemoveService(ctx, name); err != nil {
						if !isAPIError(err) {
							return err // no manager to ask about the rest
						}
						failed = append(failed, userError(err).Error())
						continue
					}
					fmt.Fprintln(cmd.OutOrStdout(), name)
				}
				if len(failed) > 0 {
					return errors.New(strings.Join(failed, "; "))
				}
				return nil
			})
		},
	}
}

func newServiceLsCmd(o *cliOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List services",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(o.format); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			var all []client.Service
			q := &client.Query{Params: url.Values{}}
			for {
				ctx, cancel := requestCtx(cmd)
				l, _, err := c.Services(ctx, q)
				cancel()
				if err != nil {
					return userError(err)
				}
				all = append(all, l.Items...)
				if l.NextToken == "" {
					break
				}
				q.Params.Set("next_token", l.NextToken)
			}
			w := cmd.OutOrStdout()
			switch {
			case o.format == "json":
				if all == nil {
					all = []client.Service{}
				}
				return printJSON(w, all)
			case o.quiet:
				for _, s := range all {
					fmt.Fprintln(w, s.Spec.Name)
				}
				return nil
			}
			var rows [][]string
			for _, s := range all {
				mode := s.Spec.Mode
				if s.Removing {
					mode += " (removing)"
				}
				// No ID column: a service's ID counts within its group, so
				// services of different groups share it; the name is what
				// names one service, and what every command takes.
				rows = append(rows, []string{s.Spec.Name, mode,
					replicasCell(s), strings.Join(s.Spec.Command, " ")})
			}
			return table(w, []string{"NAME", "MODE", "REPLICAS", "COMMAND"}, rows)
		},
	}
	cmd.Flags().StringVar(&o.format, "format", "table", "table or json")
	cmd.Flags().BoolVarP(&o.quiet, "quiet", "q", false, "only names")
	return cmd
}

// unfinishedUpdates names the update states `service ls` shows (a finished
// update shows nothing).
var unfinishedUpdates = map[string]string{"updating": "updating", "paused": "update paused",
	"rollback_started": "rolling back", "rollback_paused": "rollback paused"}

// replicasCell is `service ls`'s REPLICAS: the tasks running of any spec
// version out of those desired, then, while they differ, how many run the
// current version, and the state of an update not finished, e.g.
// "2/3 (0 at v2, update paused)".
func replicasCell(s client.Service) string {
	cell := fmt.Sprintf("%d/%d", s.RunningAny, s.Desired)
	var notes []string
	if s.Running != s.RunningAny {
		notes = append(notes, fmt.Sprintf("%d at v%d", s.Running, s.SpecVersion))
	}
	if note, ok := unfinishedUpdates[s.Update.State]; ok {
		notes = append(notes, note)
	}
	if len(notes) == 0 {
		return cell
	}
	return cell + " (" + strings.Join(notes, ", ") + ")"
}

func newServiceInspectCmd(o *cliOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect NAME",
		Short: "Show a service as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				svc, _, err := c.Service(ctx, args[0], nil)
				if err != nil {
					return err
				}
				return printJSON(cmd.OutOrStdout(), svc)
			})
		},
	}
}

func newServicePsCmd(o *cliOptions) *cobra.Command {
	var noTrunc bool
	cmd := &cobra.Command{
		Use:   "ps NAME|TASK-ID",
		Short: "List a service's tasks, or the one task whose ID begins with TASK-ID",
		Example: `  shoal service ps web
  shoal service ps 7q2k            # the task whose printed ID begins 7q2k`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(o.format); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			tasks, err := serviceOrTask(cmd, c, args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch {
			case o.format == "json":
				return printJSON(w, tasks)
			case o.quiet:
				for _, t := range tasks {
					fmt.Fprintln(w, printedTaskID(t.ID, noTrunc))
				}
				return nil
			}
			var rows [][]string
			for _, t := range tasks {
				node := t.NodeName
				if node == "" && t.Node != 0 {
					node = strconv.Itoa(int(t.Node))
				}
				msg := t.Message
				if t.State == "failed" && msg == "" {
					msg = fmt.Sprintf("exit code %d", t.ExitCode)
				}
				rows = append(rows, []string{printedTaskID(t.ID, noTrunc), fmt.Sprintf("%s.%d", t.Service, t.Slot), node,
					titleCase(t.Desired), titleCase(t.State) + " " + ago(t.Since), msg})
			}
			return table(w, []string{"ID", "NAME", "NODE", "DESIRED STATE", "CURRENT STATE", "ERROR"}, rows)
		},
	}
	cmd.Flags().StringVar(&o.format, "format", "table", "table or json")
	cmd.Flags().BoolVarP(&o.quiet, "quiet", "q", false, "only task IDs")
	cmd.Flags().BoolVar(&noTrunc, "no-trunc", false, "print whole task IDs (13 characters)")
	return cmd
}

// serviceOrTask reads the tasks `service ps ARG` lists: those of the
// service named arg, or else the one task whose ID begins with arg.
func serviceOrTask(cmd *cobra.Command, c *client.Client, arg string) ([]client.Task, error) {
	if arg == "" {
		return nil, errors.New("an empty name: give a service name or a task ID as `service ps` prints it")
	}
	tasks, err := allTasks(cmd, c, url.Values{"service": {arg}})
	var ae *client.APIError
	if err == nil || !errors.As(err, &ae) || ae.Code != client.CodeNotFound {
		return tasks, userError(err)
	}
	ctx, cancel := requestCtx(cmd)
	defer cancel()
	t, terr := resolveTask(ctx, c, arg)
	if errors.Is(terr, errNoSuchTask) {
		return nil, fmt.Errorf("no service is named %q and no task ID begins with it (see `shoal service ls`)", arg)
	}
	if terr != nil {
		return nil, terr
	}
	return []client.Task{t}, nil
}

// allTasks reads every page of a task list (errors as the client gives
// them: the caller turns them into text for the user).
func allTasks(cmd *cobra.Command, c *client.Client, params url.Values) ([]client.Task, error) {
	all := []client.Task{}
	q := &client.Query{Params: params}
	for {
		ctx, cancel := requestCtx(cmd)
		l, _, err := c.Tasks(ctx, q)
		cancel()
		if err != nil {
			return nil, err
		}
		all = append(all, l.Items...)
		if l.NextToken == "" {
			return all, nil
		}
		q.Params.Set("next_token", l.NextToken)
	}
}
