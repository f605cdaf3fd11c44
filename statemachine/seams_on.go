//go:build shoal_seams

package statemachine

import (
	"fmt"
	"strings"
)

// Test seams, compiled only with -tags shoal_seams (the model checker's
// self-test; `make test` runs it). A production build has none: see
// seams_off.go.

// seams are deliberate bugs a test may switch on.
type seams struct {
	// reapLive: the reaper may delete tasks that are still running.
	reapLive bool
	// neverDown: a disconnected node keeps a live disconnect window for
	// ever, so it never goes down (the monitor's rule before it gave
	// disconnected nodes up).
	neverDown bool
	// replaceGlobalAside: a global service's slot on a disconnected node
	// is treated as live, so a task is created pinned to the node that is
	// away (the rule before issue 12 item 4).
	replaceGlobalAside bool
	// decideEarly: a reconnecting node's originals are decided at its
	// first heartbeat, before it re-reported its tasks (the rule before
	// issue 12 item 3).
	decideEarly bool
	// freeAtRelease: a task's addresses go back to the pool when it ends,
	// not once its node confirmed it let them go (no quarantine).
	freeAtRelease bool
}

// PlantBug switches on the seeded bug named (one of Bugs) in cfg, for a
// test that runs the real binary built with -tags shoal_seams.
func PlantBug(cfg *Config, name string) error {
	switch name {
	case "reap-live":
		cfg.seams.reapLive = true
	case "never-down":
		cfg.seams.neverDown = true
	case "replace-global-aside":
		cfg.seams.replaceGlobalAside = true
	case "decide-early":
		cfg.seams.decideEarly = true
	case "free-at-release":
		cfg.seams.freeAtRelease = true
	default:
		return fmt.Errorf("no seeded bug is called %q (there are: %s)", name, strings.Join(Bugs, ", "))
	}
	return nil
}

// Bugs names the seeded bugs PlantBug knows.
var Bugs = []string{"reap-live", "never-down", "replace-global-aside", "decide-early", "free-at-release"}

// seamsCompiled reports whether this build has the seams.
const seamsCompiled = true

func (s seams) reapsLive(st TaskState) bool { return s.reapLive && st == StateRunning }

func (s seams) keepsDisconnected() bool { return s.neverDown }

func (s seams) replacesGlobalAside() bool { return s.replaceGlobalAside }

func (s seams) decidesEarly() bool { return s.decideEarly }

func (s seams) freesAtRelease() bool { return s.freeAtRelease }
