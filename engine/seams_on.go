//go:build shoal_seams

package engine

import (
	"fmt"
	"os"
	"strings"

	"shoal/statemachine"
)

// plantedBugs names the state machine's seeded bugs this test build
// plants in every group it creates (SHOAL_SEAMS, comma-separated): a test
// runs the real binary and shows that the loadgen's checks catch them. A
// state restored from a snapshot has none. Only a build with -tags
// shoal_seams reads it (seams_off.go).
var plantedBugs = os.Getenv("SHOAL_SEAMS")

func init() {
	if plantedBugs == "" {
		return
	}
	var cfg statemachine.Config
	if err := plantBugsIn(&cfg); err != nil {
		fmt.Fprintf(os.Stderr, "shoal: SHOAL_SEAMS: %v\n", err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "shoal: this test build plants the bugs SHOAL_SEAMS names: %s\n", plantedBugs)
}

func plantBugs(cfg *statemachine.Config) {
	_ = plantBugsIn(cfg) // the names were checked at start (init)
}

func plantBugsIn(cfg *statemachine.Config) error {
	for _, name := range strings.Split(plantedBugs, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if err := statemachine.PlantBug(cfg, name); err != nil {
			return err
		}
	}
	return nil
}
