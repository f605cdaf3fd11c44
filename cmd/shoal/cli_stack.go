package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"shoal/api"
	"shoal/api/client"
	"shoal/stackfile"
)

func newStackCmd() *cobra.Command {
	o := &cliOptions{}
	cmd := &cobra.Command{Use: "stack", Short: "Manage stacks: services and networks declared in one file (docs/stacks.md)"}
	addClientFlags(cmd, o)
	cmd.AddCommand(newStackDeployCmd(o), newStackLsCmd(o), newStackServicesCmd(o), newStackRmCmd(o))
	return cmd
}

// replacingFields are the spec fields whose change replaces a service's
// tasks by a rolling update (the manager's rule: anything the task runs
// with); a change of the others is stored without replacing any task.
var replacingFields = []string{"image", "command", "env", "dir", "stop_grace", "networks", "constraints", "reserve", "restart"}

func newStackDeployCmd(o *cliOptions) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "deploy -c FILE NAME",
		Short: "Create or update a stack from a stack file; services that left the file are removed",
		Example: `  shoal stack deploy -c examples/shop.yaml shop
  shoal stack deploy -c - shop < shop.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return errors.New("give the stack file with -c FILE (- reads standard input)")
			}
			var data []byte
			var err error
			if file == "-" {
				data, err = io.ReadAll(cmd.InOrStdin())
			} else {
				data, err = os.ReadFile(file)
			}
			if err != nil {
				return fmt.Errorf("reading the stack file: %w", err)
			}
			st, err := stackfile.Parse(data, args[0])
			if err != nil {
				if file != "-" {
					return fmt.Errorf("%s: %w", file, err)
				}
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			return deployStack(cmd, c, st)
		},
	}
	cmd.Flags().StringVarP(&file, "compose-file", "c", "", "the stack file (YAML; - for standard input)")
	return cmd
}

// deployStack makes the cluster match st: networks created, services
// created, changed or left alone, the stack's services not in st removed.
// It prints one line per thing it did or left alone.
func deployStack(cmd *cobra.Command, c *client.Client, st stackfile.Stack) error {
	w := cmd.OutOrStdout()
	ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
	defer cancel()
	// Check every service before changing anything.
	desired := make([]client.ServiceSpec, len(st.Services))
	for i, sp := range st.Services {
		n, err := api.NormalizeSpec(sp)
		if err != nil {
			return userError(err) // the message names the service
		}
		desired[i] = n
	}
	all, err := allServices(ctx, c)
	if err != nil {
		return userError(err)
	}
	current := map[string]client.Service{}
	for _, s := range all {
		current[s.Spec.Name] = s
	}
	for _, sp := range desired {
		if cur, ok := current[sp.Name]; ok && cur.Spec.Labels[stackfile.StackLabel] != st.Name {
			return fmt.Errorf("service %s exists and is not part of stack %s: remove or rename it first", sp.Name, st.Name)
		}
	}
	for _, nw := range st.Networks {
		have, err := c.Network(ctx, nw.Name)
		var ae *client.APIError
		switch {
		case err == nil && have.Spec.Subnet != nw.Subnet:
			return fmt.Errorf("network %s exists with subnet %s, the file gives %s: a network's subnet cannot change (remove the stack first)",
				nw.Name, have.Spec.Subnet, nw.Subnet)
		case err == nil:
		case errors.As(err, &ae) && ae.Status == 404:
			if _, err := c.CreateNetwork(ctx, nw); err != nil {
				return userError(err) // the message names the network
			}
			fmt.Fprintf(w, "Creating network %s\n", nw.Name)
		default:
			return userError(err)
		}
	}
	for _, sp := range desired {
		cur, ok := current[sp.Name]
		if !ok {
			if _, _, err := c.CreateService(ctx, sp); err != nil {
				return fmt.Errorf("service %s: %w", sp.Name, userError(err))
			}
			fmt.Fprintf(w, "Creating service %s\n", sp.Name)
			continue
		}
		changed := changedFields(cur.Spec, sp)
		if len(changed) == 0 {
			fmt.Fprintf(w, "Service %s unchanged\n", sp.Name)
			continue
		}
		if _, _, err := c.UpdateService(ctx, sp, cur.ModifyIndex); err != nil {
			return fmt.Errorf("service %s: %w", sp.Name, userError(err))
		}
		var replacing []string
		for _, f := range changed {
			if slices.Contains(replacingFields, f) {
				replacing = append(replacing, f)
			}
		}
		switch {
		case len(replacing) > 0:
			fmt.Fprintf(w, "Updating service %s (rolling update: %s changed)\n", sp.Name, strings.Join(replacing, ", "))
		case slices.Equal(changed, []string{"replicas"}):
			fmt.Fprintf(w, "Scaling service %s from %d to %d\n", sp.Name, deref(cur.Spec.Replicas), deref(sp.Replicas))
		default:
			fmt.Fprintf(w, "Updating service %s (%s changed; no task replaced)\n", sp.Name, strings.Join(changed, ", "))
		}
	}
	for _, s := range stackServices(all, st.Name) {
		if slices.ContainsFunc(desired, func(d client.ServiceSpec) bool { return d.Name == s.Spec.Name }) || s.Removing {
			continue
		}
		if _, _, err := c.RemoveService(ctx, s.Spec.Name); err != nil {
			return fmt.Errorf("service %s: %w", s.Spec.Name, userError(err))
		}
		fmt.Fprintf(w, "Removing service %s (not in the file)\n", s.Spec.Name)
	}
	return nil
}

func deref(p *uint32) uint32 {
	if p == nil {
		return 0
	}
	return *p
}

// changedFields lists the top-level spec fields (JSON names, in order)
// whose stored form differs between cur and next, both as the manager
// shows them.
func changedFields(cur, next client.ServiceSpec) []string {
	fields := func(s client.ServiceSpec) map[string]json.RawMessage {
		b, _ := json.Marshal(s)
		var m map[string]json.RawMessage
		_ = json.Unmarshal(b, &m)
		return m
	}
	a, b := fields(cur), fields(next)
	var out []string
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, k)
		}
	}
	for k, v := range b {
		if !jsonEqual(a[k], v) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func jsonEqual(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// allServices reads every page of the service list.
func allServices(ctx context.Context, c *client.Client) ([]client.Service, error) {
	var all []client.Service
	q := &client.Query{Params: map[string][]string{}}
	for {
		l, _, err := c.Services(ctx, q)
		if err != nil {
			return nil, err
		}
		all = append(all, l.Items...)
		if l.NextToken == "" {
			return all, nil
		}
		q.Params["next_token"] = []string{l.NextToken}
	}
}

// stackServices are the services of all labelled as stack name's.
func stackServices(all []client.Service, name string) []client.Service {
	var out []client.Service
	for _, s := range all {
		if s.Spec.Labels[stackfile.StackLabel] == name {
			out = append(out, s)
		}
	}
	return out
}

// stackNetworks are the networks named as stack name's (NAME_...).
func stackNetworks(ctx context.Context, c *client.Client, name string) ([]string, error) {
	l, err := c.Networks(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range l.Items {
		if strings.HasPrefix(n.Spec.Name, name+"_") {
			out = append(out, n.Spec.Name)
		}
	}
	return out, nil
}

func newStackLsCmd(o *cliOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List stacks (by their services' shoal.stack label)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				all, err := allServices(ctx, c)
				if err != nil {
					return err
				}
				count := map[string]int{}
				for _, s := range all {
					if n, ok := s.Spec.Labels[stackfile.StackLabel]; ok {
						count[n]++
					}
				}
				var rows [][]string
				for _, n := range slices.Sorted(maps.Keys(count)) {
					rows = append(rows, []string{n, strconv.Itoa(count[n])})
				}
				return table(cmd.OutOrStdout(), []string{"NAME", "SERVICES"}, rows)
			})
		},
	}
	return cmd
}

func newStackServicesCmd(o *cliOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "services NAME",
		Short: "List a stack's services",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(o.format); err != nil {
				return err
			}
			return withClient(cmd, o, func(ctx context.Context, c *client.Client) error {
				all, err := allServices(ctx, c)
				if err != nil {
					return err
				}
				svcs := stackServices(all, args[0])
				if len(svcs) == 0 {
					return fmt.Errorf("stack %s has no services", args[0])
				}
				w := cmd.OutOrStdout()
				if o.format == "json" {
					return printJSON(w, svcs)
				}
				var rows [][]string
				for _, s := range svcs {
					mode := s.Spec.Mode
					if mode == "" {
						mode = "replicated"
					}
					rows = append(rows, []string{s.Spec.Name, mode, replicasCell(s), strings.Join(s.Spec.Command, " ")})
				}
				return table(w, []string{"NAME", "MODE", "REPLICAS", "COMMAND"}, rows)
			})
		},
	}
	cmd.Flags().StringVar(&o.format, "format", "table", "table or json")
	return cmd
}

func newStackRmCmd(o *cliOptions) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"remove"},
		Short:   "Remove a stack: its services, then its networks once their addresses are released",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout+30*time.Second)
			defer cancel()
			return userError(removeStack(ctx, cmd.OutOrStdout(), c, args[0], timeout))
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for the services' tasks to stop before removing the networks")
	return cmd
}

// removeStack removes stack name's services, then retries removing its
// networks until the manager takes it (the services' tasks stopped and
// their addresses released) or timeout passes.
func removeStack(ctx context.Context, w io.Writer, c *client.Client, name string, timeout time.Duration) error {
	all, err := allServices(ctx, c)
	if err != nil {
		return err
	}
	nets, err := stackNetworks(ctx, c, name)
	if err != nil {
		return err
	}
	svcs := stackServices(all, name)
	if len(svcs) == 0 && len(nets) == 0 {
		return fmt.Errorf("stack %s has no services or networks", name)
	}
	for _, s := range svcs {
		if _, _, err := c.RemoveService(ctx, s.Spec.Name); err != nil {
			return err
		}
		fmt.Fprintf(w, "Removing service %s\n", s.Spec.Name)
	}
	deadline := time.Now().Add(timeout)
	for _, n := range nets {
		for {
			err := c.RemoveNetwork(ctx, n)
			var ae *client.APIError
			if err == nil || errors.As(err, &ae) && ae.Status == 404 {
				fmt.Fprintf(w, "Removing network %s\n", n)
				break
			}
			if time.Now().After(deadline) || !errors.As(err, &ae) {
				return fmt.Errorf("network %s: %w (its services' tasks may still be stopping; run `shoal stack rm %s` again later)", n, userError(err), name)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	return nil
}
