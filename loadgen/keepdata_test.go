package loadgen

import "testing"

// A run's temporary data stays when there is something to look at in it:
// a violation, a run that did not converge, or a ramp that timed out short
// of its tasks; a clean run removes it.
func TestKeepDataWhenThereIsSomethingToRead(t *testing.T) {
	for _, c := range []struct {
		violations           int
		converged, rampShort bool
		keep                 bool
	}{
		{0, true, false, false},
		{1, true, false, true},
		{0, false, false, true},
		{0, true, true, true},
	} {
		if got := keepData(c.violations, c.converged, c.rampShort); got != c.keep {
			t.Errorf("keepData(violations %d, converged %v, ramp short %v) = %v, want %v", c.violations, c.converged, c.rampShort, got, c.keep)
		}
	}
}
