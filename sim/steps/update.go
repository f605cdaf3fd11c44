package steps

import (
	"fmt"

	sm "shoal/statemachine"
)

// updateLine describes a service's update progress for the dump ("" when
// it never updated).
func updateLine(svc *sm.Service, elapsed func(int64) string) string {
	u := svc.Update
	if u.State == sm.UpdateNone {
		return ""
	}
	line := fmt.Sprintf("  update: %s since %s failures=%d", u.State, elapsed(u.StartedAt), u.Failures)
	if u.CompletedAt != 0 {
		line += " done " + elapsed(u.CompletedAt)
	}
	if u.Message != "" {
		line += " (" + u.Message + ")"
	}
	return line + "\n"
}
