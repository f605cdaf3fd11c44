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
		// The manager says whether the service converged, and if not why.
		switch cv := svc.Convergence; cv.State {
		case client.Converging:
			return false, nil
		case client.UpdatePaused:
			// Not converged: the old version's tasks serve on.
			return true, errors.New(cv.Why)
		case client.Converged:
			fmt.Fprintf(out, "%s: converged: %d/%d running\n", name, svc.Running, svc.Desired)
			if cv.Failed > 0 {
				return true, fmt.Errorf("%s; see `shoal service ps %s`", cv.Why, name)
			}
			return true, nil
		default:
			return true, fmt.Errorf("the manager did not say whether %s converged (convergence %q); is it a Shoal manager of this version?", name, cv.State)
		}
	}
	if ok, err := check(); ok || err != nil {
		return userError(err)
	}
	var checkErr error
	errDone := errors.New("done")
	err := c.Events(ctx, index, []string{"task", "service"}, func(ev client.Event) error {
		if ev.Task != nil && ev.Task.Service == name {
			printProgress(out, ev.Task, last)
		}
		if ev.Topic == "heartbeat" || (ev.Task != nil && ev.Task.Service == name) || ev.Key == name {
			ok, err := check()
			if ok {
				checkErr = err
				return errDone
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errDone):
		return checkErr
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		svc, _, serr := c.Service(context.Background(), name, nil)
		if serr != nil {
			return userError(serr)
		}
		// The manager's account (during an update it counts the old
		// version's tasks too), else the counts at the current version.
		where := svc.Convergence.Why
		if where == "" {
			where = fmt.Sprintf("%d/%d running", svc.Running, svc.Desired)
		}
		return fmt.Errorf("%s did not converge within %s: %s; see `shoal service ps %s`", name, timeout, where, name)
	}
	return userError(err)
}

// printProgress prints a line when a task's state changes.
func printProgress(w io.Writer, t *client.Task, last map[string]string) {
	if last[t.ID] == t.State {
		return
	}
	last[t.ID] = t.State
	line := fmt.Sprintf("  %s.%d  task %s  %s", t.Service, t.Slot, printedTaskID(t.ID, false), t.State)
	if t.NodeName != "" {
		line += " on " + t.NodeName
	}
	if t.Message != "" {
		line += ": " + t.Message
	}
	fmt.Fprintln(w, line)
}
