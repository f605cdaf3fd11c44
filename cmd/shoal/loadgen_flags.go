package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"shoal/loadgen"
)

// checkLoadgenFlags refuses, before anything starts, what would otherwise
// be quietly replaced by a default or found wrong only at the end of a run
// that may have taken minutes: counts below one, more services than tasks,
// a fault share outside (0, 1], a threshold that cannot be read, and an
// output file that cannot be written.
func checkLoadgenFlags(cmd *cobra.Command, o loadgenOptions) error {
	c := o.cfg
	counts := map[string]int{"agents": c.Agents, "tasks": c.Tasks, "services": c.Services}
	if o.join == "" { // --managers is not used with --join
		counts["managers"] = c.Managers
	}
	for _, flag := range []string{"agents", "tasks", "services", "managers"} {
		if v, ok := counts[flag]; ok && v < 1 {
			return fmt.Errorf("--%s must be 1 or more (got %d)", flag, v)
		}
	}
	// The default --services (20) is capped at --tasks; only a number the
	// user gave is refused.
	if c.Services > c.Tasks && cmd.Flags().Changed("services") {
		return fmt.Errorf("--services %d is more than --tasks %d: every service needs at least one task", c.Services, c.Tasks)
	}
	if cmd.Flags().Changed("fault-share") && (c.FaultShare <= 0 || c.FaultShare > 1) {
		return fmt.Errorf("--fault-share must be above 0 and at most 1, a share of --agents (got %g)", c.FaultShare)
	}
	if c.FleetWorkers < 0 {
		return fmt.Errorf("--fleet-workers must be 0 or more (got %d)", c.FleetWorkers)
	}
	if c.FleetWorkers == 0 {
		for _, flag := range []string{"fleet-local", "fleet-listen", "fleet-token-file", "fleet-wait"} {
			if cmd.Flags().Changed(flag) {
				return fmt.Errorf("--%s is for a run with --fleet-workers", flag)
			}
		}
	} else if c.FleetLocal < 0 || c.FleetLocal >= c.Agents {
		return fmt.Errorf("--fleet-local %d must be at least 0 and leave some of the %d agents for the --fleet-workers", c.FleetLocal, c.Agents)
	}
	if err := loadgen.CheckThresholds(c.Thresholds); err != nil {
		return fmt.Errorf("--threshold: %w", err)
	}
	for _, f := range []struct{ flag, path string }{
		{"json", o.jsonFile}, {"report", o.reportFile}, {"cpuprofile", o.cpuProfile}, {"memprofile", o.memProfile},
		{"fleet-token-file", c.FleetTokenFile},
	} {
		if err := writable(f.path); err != nil {
			return fmt.Errorf("--%s %s: %w (nothing was started)", f.flag, f.path, err)
		}
	}
	return nil
}

// writable reports whether a file can be written at path ("" can): an
// existing file opens for writing (it is not truncated here), and a new
// one can be made in its directory (a probe file, removed at once).
func writable(path string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return errors.New("is a directory; give a file name")
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("cannot write it: %w", unwrapPath(err))
		}
		return f.Close()
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".shoal-loadgen-write-check-*")
	if err != nil {
		return fmt.Errorf("cannot write a file in %s: %w", filepath.Dir(path), unwrapPath(err))
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// unwrapPath gives a path error's cause alone (the caller names the path).
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
