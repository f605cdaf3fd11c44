package dialect

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	sm "shoal/statemachine"
)

// The user's service options, the same for every runner's create-service
// and update-service:
//
//	replicas=N mode=replicated|global image=v1 networks=a,b constraints=node.labels.zone==a,…
//	restart=any|on-failure|none delay=5s max-attempts=N window=1m
//	lost-after=5m replace=true|false reconcile=best_score|keep_original|keep_replacement|longest_running
//	cpu=milli-cores mem=64M preferences=node.labels.zone,… max-per-node=N strategy=spread|binpack
//	parallelism=N update-delay=10s monitor=5s failure-action=pause|continue|rollback
//	    max-failure-ratio=0.2 order=stop-first|start-first
//	rollback-parallelism=N rollback-delay=… rollback-monitor=… rollback-failure-action=…
//	    rollback-max-failure-ratio=… rollback-order=…
//
// A create-service without rollback-* options gives the rollback the
// update's configuration, pausing where the update would roll back (the
// scripts written before rollback configurations keep their meaning).
var (
	// ServiceKeys are every service option.
	ServiceKeys = append([]string{"replicas", "mode", "restart", "networks", "image", "constraints",
		"delay", "max-attempts", "window", "lost-after", "replace", "reconcile",
		"preferences", "max-per-node", "strategy", "cpu", "mem"}, append(updateKeys, rollbackKeys...)...)
	updateKeys   = []string{"parallelism", "update-delay", "monitor", "failure-action", "max-failure-ratio", "order"}
	rollbackKeys = []string{"rollback-parallelism", "rollback-delay", "rollback-monitor", "rollback-failure-action",
		"rollback-max-failure-ratio", "rollback-order"}
)

// Enum reads one of names as its index.
func Enum[T ~uint8](what, s string, names ...string) (T, error) {
	for i, n := range names {
		if n == s {
			return T(i), nil
		}
	}
	return 0, fmt.Errorf("unknown %s %q (want one of %s)", what, s, strings.Join(names, ", "))
}

// ServiceSpec applies op's service options to spec: a new service's
// defaults (create) or the current spec (an update).
func ServiceSpec(op Op, spec *sm.ServiceSpec, create bool) error {
	var err error
	if v, ok := op.Get("cpu"); ok {
		if spec.CPU, err = strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("cpu wants milli-cores, got %q", v)
		}
	}
	if v, ok := op.Get("mem"); ok {
		if spec.Memory, err = Size(v); err != nil {
			return fmt.Errorf("mem wants a size such as 64M, got %q", v)
		}
	}
	if _, ok := op.Get("preferences"); ok {
		spec.Placement.Preferences = op.List("preferences")
	}
	if v, ok := op.Get("max-per-node"); ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return fmt.Errorf("max-per-node wants a count, got %q", v)
		}
		spec.Placement.MaxPerNode = uint32(n)
	}
	if v, ok := op.Get("strategy"); ok {
		if spec.Placement.Strategy, err = Enum[sm.PlacementStrategy]("strategy", v, "spread", "binpack"); err != nil {
			return err
		}
	}
	if v, ok := op.Get("replicas"); ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return fmt.Errorf("replicas wants a count, got %q", v)
		}
		spec.Replicas = uint32(n)
	}
	if v, ok := op.Get("mode"); ok {
		if spec.Mode, err = Enum[sm.ServiceMode]("mode", v, "replicated", "global"); err != nil {
			return err
		}
	}
	if v, ok := op.Get("restart"); ok {
		if spec.Restart.Condition, err = Enum[sm.RestartCondition]("restart condition", v, "any", "on-failure", "none"); err != nil {
			return err
		}
	}
	if err := updateConfig(op, updateKeys, &spec.Update); err != nil {
		return err
	}
	if create {
		spec.Rollback = spec.Update
		if spec.Rollback.FailureAction == sm.ActionRollback {
			spec.Rollback.FailureAction = sm.ActionPause
		}
	}
	if err := updateConfig(op, rollbackKeys, &spec.Rollback); err != nil {
		return err
	}
	if v, ok := op.Get("replace"); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("replace wants true or false, got %q", v)
		}
		spec.Disconnect.NoReplace = !b
	}
	if v, ok := op.Get("reconcile"); ok {
		if spec.Disconnect.Reconcile, err = Enum[sm.ReconcileMode]("reconcile", v, "best_score", "keep_original", "keep_replacement", "longest_running"); err != nil {
			return err
		}
	}
	for key, dst := range map[string]*int64{"delay": &spec.Restart.Delay, "window": &spec.Restart.Window, "lost-after": &spec.Disconnect.LostAfter} {
		if v, ok := op.Get(key); ok {
			dur, err := time.ParseDuration(v)
			if err != nil || dur < 0 {
				return fmt.Errorf("%s wants a duration such as 5s, got %q", key, v)
			}
			*dst = int64(dur)
		}
	}
	if v, ok := op.Get("max-attempts"); ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return fmt.Errorf("max-attempts wants a count, got %q", v)
		}
		spec.Restart.MaxAttempts = uint32(n)
	}
	if _, ok := op.Get("networks"); ok {
		spec.Networks = op.List("networks")
	}
	if v, ok := op.Get("image"); ok {
		spec.Image = v
	}
	if _, ok := op.Get("constraints"); ok {
		spec.Constraints = op.List("constraints")
	}
	return nil
}

// updateConfig reads the options named keys (in updateKeys' order) into u.
func updateConfig(op Op, keys []string, u *sm.UpdateConfig) error {
	if v, ok := op.Get(keys[0]); ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return fmt.Errorf("%s wants a count, got %q", keys[0], v)
		}
		u.Parallelism = uint32(n)
	}
	for key, dst := range map[string]*int64{keys[1]: &u.Delay, keys[2]: &u.Monitor} {
		if v, ok := op.Get(key); ok {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("%s wants a duration such as 5s, got %q", key, v)
			}
			*dst = int64(d)
		}
	}
	if v, ok := op.Get(keys[3]); ok {
		var err error
		if u.FailureAction, err = Enum[sm.FailureAction]("failure action", v, "pause", "continue", "rollback"); err != nil {
			return err
		}
	}
	if v, ok := op.Get(keys[4]); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%s wants a fraction such as 0.2, got %q", keys[4], v)
		}
		u.MaxFailureRatio = f
	}
	if v, ok := op.Get(keys[5]); ok {
		var err error
		if u.Order, err = Enum[sm.UpdateOrder]("order", v, "stop-first", "start-first"); err != nil {
			return err
		}
	}
	return nil
}
