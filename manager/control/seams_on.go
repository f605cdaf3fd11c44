//go:build shoal_seams

package control

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Test seams, compiled only with -tags shoal_seams (the simulation's
// self-test, make sim-planted). A production build has none: see
// seams_off.go.

// seams are deliberate bugs a test may switch on.
type seams struct {
	// syncLagging: a sync is answered from this replica's state even when
	// it has not applied the node's sequence (no commit, no linearizable
	// read), so the agent is told to destroy tasks the replica does not
	// know yet.
	syncLagging bool
	// completeEarly: a COMPLETE is rendered from this replica's state as
	// applied so far, without its read barrier, so a lagging replica hands
	// back tasks the agent already stopped and forgot.
	completeEarly bool
}

// plantable maps each seeded bug's name to the seam it switches on.
var plantable = map[string]func(*seams){
	"sync-lagging":   func(s *seams) { s.syncLagging = true },
	"complete-early": func(s *seams) { s.completeEarly = true },
}

// PlantBug switches on the seeded bug named (one of Bugs) in cfg.
func PlantBug(cfg *AgentsConfig, name string) error {
	plant, ok := plantable[name]
	if !ok {
		return fmt.Errorf("no seeded bug is called %q (there are: %s)", name, strings.Join(Bugs, ", "))
	}
	plant(&cfg.seams)
	return nil
}

// Bugs names the seeded bugs PlantBug knows, sorted.
var Bugs = slices.Sorted(maps.Keys(plantable))

func (s seams) answersSyncLagging() bool { return s.syncLagging }

func (s seams) completesEarly() bool { return s.completeEarly }
