//go:build shoal_seams

package statemachine

import (
	"fmt"
	"maps"
	"slices"
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
	// unknownPending: a task that never ran on a node that disconnects is
	// left unknown like a running one, kept for the window and reconciled
	// at reconnect (the rule before issue 33 item 3).
	unknownPending bool
}

// plantable maps each seeded bug's name to the seam it switches on.
var plantable = map[string]func(*seams){
	"reap-live":            func(s *seams) { s.reapLive = true },
	"never-down":           func(s *seams) { s.neverDown = true },
	"replace-global-aside": func(s *seams) { s.replaceGlobalAside = true },
	"decide-early":         func(s *seams) { s.decideEarly = true },
	"free-at-release":      func(s *seams) { s.freeAtRelease = true },
	"unknown-pending":      func(s *seams) { s.unknownPending = true },
}

// PlantBug switches on the seeded bug named (one of Bugs) in cfg, for a
// test that runs the real binary built with -tags shoal_seams.
func PlantBug(cfg *Config, name string) error {
	plant, ok := plantable[name]
	if !ok {
		return fmt.Errorf("no seeded bug is called %q (there are: %s)", name, strings.Join(Bugs, ", "))
	}
	plant(&cfg.seams)
	return nil
}

// Bugs names the seeded bugs PlantBug knows, sorted.
var Bugs = slices.Sorted(maps.Keys(plantable))

// seamsCompiled reports whether this build has the seams.
const seamsCompiled = true

func (s seams) reapsLive(st TaskState) bool { return s.reapLive && st == StateRunning }

func (s seams) keepsDisconnected() bool { return s.neverDown }

func (s seams) replacesGlobalAside() bool { return s.replaceGlobalAside }

func (s seams) decidesEarly() bool { return s.decideEarly }

func (s seams) freesAtRelease() bool { return s.freeAtRelease }

func (s seams) keepsPendingUnknown() bool { return s.unknownPending }
