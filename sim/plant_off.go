//go:build !shoal_seams

package sim

import (
	"errors"

	"shoal/statemachine"
)

// plant: a build without -tags shoal_seams has no seeded bug to plant.
func plant(names string) (func(*statemachine.Config), error) {
	if names == "" {
		return nil, nil
	}
	return nil, errors.New("seeded bugs need a build with -tags shoal_seams")
}

// SeamsCompiled reports whether this build can plant seeded bugs.
const SeamsCompiled = false
