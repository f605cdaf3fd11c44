//go:build shoal_seams

package sim

import (
	"strings"

	"shoal/statemachine"
)

// plant returns the state configuration that switches on the seeded bugs
// named (comma-separated; "" none).
func plant(names string) (func(*statemachine.Config), error) {
	if names == "" {
		return nil, nil
	}
	var probe statemachine.Config
	for _, n := range strings.Split(names, ",") {
		if err := statemachine.PlantBug(&probe, n); err != nil {
			return nil, err
		}
	}
	return func(c *statemachine.Config) {
		for _, n := range strings.Split(names, ",") {
			_ = statemachine.PlantBug(c, n)
		}
	}, nil
}

// SeamsCompiled reports whether this build can plant seeded bugs.
const SeamsCompiled = true
