//go:build !shoal_seams

package engine

import "shoal/statemachine"

// plantBugs does nothing in a production build: only a build with -tags
// shoal_seams plants seeded bugs (seams_on.go).
func plantBugs(*statemachine.Config) {}
