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

// converged reports whether svc settled: every wanted task of the current
// spec runs, or ended for good (completed one-shot tasks, unless the service
// restarts completed tasks; failed ones when it never restarts), and no
// rolling update is in flight. failed counts the tasks that ended in failure
// for good.
func converged(svc client.Service) (done bool, failed int) {
	if svc.Update.State == "updating" || svc.Update.State == "rollback_started" {
		return false, 0
	}
	if svc.Update.State == "paused" || svc.Update.State == "rollback_paused" {
		return true, 0 // the update stopped; convergence reports it
	}
	settled := svc.Running
	cond := "any"
	if svc.Spec.Restart != nil {
		cond = svc.Spec.Restart.Condition
	}
	if cond != "any" {
		settled += svc.Tasks["complete"]
	}
	if cond == "none" {
		failed = svc.Tasks["failed"] + svc.Tasks["rejected"]
		settled += failed
	}
	return settled >= svc.Desired, failed
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
		if done, failed := converged(svc); done {
			if svc.Update.State == "paused" || svc.Update.State == "rollback_paused" {
				// Not converged: the old version's tasks serve on.
				return true, fmt.Errorf("the update of %s paused with %d/%d running, %d at v%d: %s",
					name, svc.RunningAny, svc.Desired, svc.Running, svc.SpecVersion, svc.Update.Message)
			}
			fmt.Fprintf(out, "%s: converged: %d/%d running\n", name, svc.Running, svc.Desired)
			switch {
			case failed > 0:
				return true, fmt.Errorf("%d task(s) of %s failed and will not be restarted (restart condition none); see `shoal service ps %s`", failed, name, name)
			}
			return true, nil
		}
		return false, nil
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
