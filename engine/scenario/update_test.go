package scenario

import (
	"fmt"
	"strconv"
	"time"

	sm "shoal/statemachine"
)

// updateKeys are the create-/update-service arguments of a rolling update:
// parallelism=N update-delay=10s monitor=5s failure-action=pause|continue|rollback
// max-failure-ratio=0.2 order=stop-first|start-first.
var updateKeys = []string{"parallelism", "update-delay", "monitor", "failure-action", "max-failure-ratio", "order"}

func parseUpdateArgs(a args, u *sm.UpdateConfig) error {
	if v, ok := a.kv["parallelism"]; ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return fmt.Errorf("parallelism wants a count, got %q", v)
		}
		u.Parallelism = uint32(n)
	}
	for key, dst := range map[string]*int64{"update-delay": &u.Delay, "monitor": &u.Monitor} {
		if v, ok := a.kv[key]; ok {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("%s wants a duration such as 5s, got %q", key, v)
			}
			*dst = int64(d)
		}
	}
	if v, ok := a.kv["failure-action"]; ok {
		var err error
		if u.FailureAction, err = parseEnum[sm.FailureAction]("failure action", v, "pause", "continue", "rollback"); err != nil {
			return err
		}
	}
	if v, ok := a.kv["max-failure-ratio"]; ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("max-failure-ratio wants a fraction such as 0.2, got %q", v)
		}
		u.MaxFailureRatio = f
	}
	if v, ok := a.kv["order"]; ok {
		var err error
		if u.Order, err = parseEnum[sm.UpdateOrder]("order", v, "stop-first", "start-first"); err != nil {
			return err
		}
	}
	return nil
}

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
