//go:build !shoal_seams

package statemachine

// seams are compiled out of a build without -tags shoal_seams: the
// checks below are constant false (see seams_on.go).
type seams struct{}

const seamsCompiled = false

func (seams) reapsLive(TaskState) bool { return false }

func (seams) keepsDisconnected() bool { return false }

func (seams) replacesGlobalAside() bool { return false }

func (seams) decidesEarly() bool { return false }

func (seams) freesAtRelease() bool { return false }

func (seams) keepsPendingUnknown() bool { return false }
