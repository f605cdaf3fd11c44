//go:build shoal_seams

package sim

import (
	"slices"
	"strings"

	"shoal/manager/control"
	"shoal/statemachine"
)

// plant returns the state configuration and the agent protocol's
// configuration that switch on the seeded bugs named (comma-separated;
// "" none): the state machine's (statemachine.Bugs) and the agent
// protocol's (control.Bugs).
func plant(names string) (plants, error) {
	var p plants
	if names == "" {
		return p, nil
	}
	var state, proto []string
	var probe statemachine.Config
	for _, n := range strings.Split(names, ",") {
		if slices.Contains(control.Bugs, n) {
			proto = append(proto, n)
			continue
		}
		if err := statemachine.PlantBug(&probe, n); err != nil {
			return p, err
		}
		state = append(state, n)
	}
	if len(state) > 0 {
		p.state = func(c *statemachine.Config) {
			for _, n := range state {
				_ = statemachine.PlantBug(c, n)
			}
		}
	}
	if len(proto) > 0 {
		p.control = func(c *control.AgentsConfig) {
			for _, n := range proto {
				_ = control.PlantBug(c, n)
			}
		}
	}
	return p, nil
}

// statePlanted reports whether names (as for plant) name one of the
// state machine's seeded bugs, which a replica restored from a snapshot
// does not keep.
func statePlanted(names string) bool {
	for _, n := range strings.Split(names, ",") {
		if n != "" && !slices.Contains(control.Bugs, n) {
			return true
		}
	}
	return false
}

// SeamsCompiled reports whether this build can plant seeded bugs.
const SeamsCompiled = true
