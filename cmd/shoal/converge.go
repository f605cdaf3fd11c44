package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"shoal/api/client"
)

// converged reports whether svc reached what was declared: every wanted
// task of the current spec runs (one-shot tasks that completed count, unless
// the service restarts completed tasks), and no rolling update is in flight.
func converged(svc client.Service) bool {
	if svc.Update.State == "updating" || svc.Update.State == "rollback_started" {
		return false
	}
	if svc.Update.State == "paused" || svc.Update.State == "rollback_paused" {
		return true // the update stopped; convergence reports it
	}
	done := svc.Running
	if svc.Spec.Restart != nil && svc.Spec.Restart.Condition != "any" {
		done += svc.Tasks["complete"]
	}
	return done >= svc.Desired
}

// converge follows the event stream from index until the service converges,
// printing each task's progress, or timeout passes.
func converge(cmd *cobra.Command, c *client.Client, name, index string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	out := cmd.OutOrStdout()
	last := map[string]string{} // task ID → state printed
	check := func() (bool, error) {
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		svc, _, err := c.Service(rctx, name, nil)
		if err != nil {
			return false, err
		}
		if converged(svc) {
			fmt.Fprintf(out, "%s: converged: %d/%d running\n", name, svc.Running, svc.Desired)
			if svc.Update.State == "paused" || svc.Update.State == "rollback_paused" {
				return true, fmt.Errorf("the update of %s paused: %s", name, svc.Update.Message)
			}
			return true, nil
		}
		return false, nil
	}
	if ok, err := check(); ok || err != nil {
		return userError(err)
	}
	errDone := errors.New("done")
	err := c.Events(ctx, index, []string{"task", "service"}, func(ev client.Event) error {
		if ev.Task != nil && ev.Task.Service == name {
			printProgress(out, ev.Task, last)
		}
		if ev.Topic == "heartbeat" || (ev.Task != nil && ev.Task.Service == name) || ev.Key == name {
			ok, err := check()
			if err != nil {
				return err
			}
			if ok {
				return errDone
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errDone):
		return nil
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		svc, _, serr := c.Service(context.Background(), name, nil)
		if serr != nil {
			return userError(serr)
		}
		return fmt.Errorf("%s did not converge within %s: %d/%d running; see `shoal service ps %s`", name, timeout, svc.Running, svc.Desired, name)
	}
	return userError(err)
}

// printProgress prints a line when a task's state changes.
func printProgress(w io.Writer, t *client.Task, last map[string]string) {
	if last[t.ID] == t.State {
		return
	}
	last[t.ID] = t.State
	line := fmt.Sprintf("  %s.%d  task %s  %s", t.Service, t.Slot, t.ID, t.State)
	if t.NodeName != "" {
		line += " on " + t.NodeName
	}
	if t.Message != "" {
		line += ": " + t.Message
	}
	fmt.Fprintln(w, line)
}
