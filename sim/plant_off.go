//go:build !shoal_seams

package sim

import "errors"

// plant: a build without -tags shoal_seams has no seeded bug to plant.
func plant(names string) (plants, error) {
	if names == "" {
		return plants{}, nil
	}
	return plants{}, errors.New("seeded bugs need a build with -tags shoal_seams")
}

// statePlanted reports whether names plant anything (none can be planted
// in this build).
func statePlanted(names string) bool { return names != "" }

// SeamsCompiled reports whether this build can plant seeded bugs.
const SeamsCompiled = false
