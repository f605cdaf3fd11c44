package steps

import (
	"fmt"
	"strconv"
	"time"

	sm "shoal/statemachine"
)

// updateKeys are the create-/update-service arguments of a rolling update:
// parallelism=N update-delay=10s monitor=5s failure-action=pause|continue|rollback
// max-failure-ratio=0.2 order=stop-first|start-first; rollbackKeys those
// of the rollback configuration, each named rollback-<key> (a
// create-service without them gives the rollback the update's
// configuration, pausing where the update would roll back: the scripts
// written before rollback configurations keep their meaning).
var (
	updateKeys   = []string{"parallelism", "update-delay", "monitor", "failure-action", "max-failure-ratio", "order"}
	rollbackKeys = []string{"rollback-parallelism", "rollback-delay", "rollback-monitor", "rollback-failure-action",
		"rollback-max-failure-ratio", "rollback-order"}
)

// parseUpdateArgs reads the arguments named keys (in updateKeys' order)
// into u.
func parseUpdateArgs(a args, keys []string, u *sm.UpdateConfig) error {
	if v, ok := a.kv[keys[0]]; ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return fmt.Errorf("%s wants a count, got %q", keys[0], v)
		}
		u.Parallelism = uint32(n)
	}
	for key, dst := range map[string]*int64{keys[1]: &u.Delay, keys[2]: &u.Monitor} {
		if v, ok := a.kv[key]; ok {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("%s wants a duration such as 5s, got %q", key, v)
			}
			*dst = int64(d)
		}
	}
	if v, ok := a.kv[keys[3]]; ok {
		var err error
		if u.FailureAction, err = parseEnum[sm.FailureAction]("failure action", v, "pause", "continue", "rollback"); err != nil {
			return err
		}
	}
	if v, ok := a.kv[keys[4]]; ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%s wants a fraction such as 0.2, got %q", keys[4], v)
		}
		u.MaxFailureRatio = f
	}
	if v, ok := a.kv[keys[5]]; ok {
		var err error
		if u.Order, err = parseEnum[sm.UpdateOrder]("order", v, "stop-first", "start-first"); err != nil {
			return err
		}
	}
	return nil
}

// parseRollbackArgs reads the rollback-* arguments into spec.Rollback; on
// create, it starts from the update configuration (see updateKeys).
func parseRollbackArgs(a args, create bool, spec *sm.ServiceSpec) error {
	if create {
		spec.Rollback = spec.Update
		if spec.Rollback.FailureAction == sm.ActionRollback {
			spec.Rollback.FailureAction = sm.ActionPause
		}
	}
	return parseUpdateArgs(a, rollbackKeys, &spec.Rollback)
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
