//go:build !shoal_seams

package control

// seams are compiled out of a build without -tags shoal_seams: the
// checks below are constant false (see seams_on.go).
type seams struct{}

func (seams) answersSyncLagging() bool { return false }

func (seams) completesEarly() bool { return false }
