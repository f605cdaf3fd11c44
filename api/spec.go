package api

import (
	"fmt"
	"slices"
	"time"

	"shoal/api/client"
	"shoal/statemachine"
)

// API-level defaults of a service spec (SwarmKit's), applied where the user
// left a field out.
const (
	defaultRestartDelay = 5 * time.Second
	defaultParallelism  = 1
	defaultMonitor      = 5 * time.Second
)

// parseEnum returns the value among values whose String() is name (def
// when name is empty), or a spec error naming field and the values allowed.
func parseEnum[T ~uint8](field, name string, def T, values ...T) (T, error) {
	if name == "" {
		return def, nil
	}
	var names []string
	for _, v := range values {
		s := fmt.Sprint(v)
		if s == name {
			return v, nil
		}
		names = append(names, s)
	}
	return def, invalidSpec(field, "%s %q is not one of %v", field, name, names)
}

// toSpec turns a user's document into a state machine spec, filling the
// defaults. Field-level mistakes come back as 422 naming the field.
func toSpec(d *client.ServiceSpec) (statemachine.ServiceSpec, error) {
	var sp statemachine.ServiceSpec
	var err error
	sp.Name = d.Name
	if d.Name == "" {
		return sp, invalidSpec("name", "a service needs a name")
	}
	if sp.Mode, err = parseEnum("mode", d.Mode, statemachine.ModeReplicated, statemachine.ModeReplicated, statemachine.ModeGlobal); err != nil {
		return sp, err
	}
	switch {
	case d.Replicas != nil && sp.Mode == statemachine.ModeGlobal:
		return sp, invalidSpec("replicas", "a global service runs one task per node; it takes no replica count")
	case d.Replicas != nil:
		sp.Replicas = *d.Replicas
	case sp.Mode == statemachine.ModeReplicated:
		sp.Replicas = 1
	}
	sp.Image, sp.Command, sp.Env, sp.Dir = d.Image, d.Command, d.Env, d.Dir
	if len(d.Command) == 0 && d.Image == "" {
		return sp, invalidSpec("command", "service %q needs a command to run (shoal service create %s -- COMMAND [ARGS...])", d.Name, d.Name)
	}
	if d.StopGrace != nil {
		sp.StopGrace = int64(*d.StopGrace)
	}
	for i, n := range d.Networks {
		if slices.Contains(d.Networks[:i], n) {
			// Each entry attaches the task once more: two addresses on one network.
			return sp, invalidSpec("networks", "service %q: network %q is listed twice in its networks", d.Name, n)
		}
	}
	sp.Networks, sp.Constraints = d.Networks, d.Constraints
	sp.CPU, sp.Memory = d.Reserve.CPU, d.Reserve.Memory
	sp.Restart.Delay = int64(defaultRestartDelay)
	if r := d.Restart; r != nil {
		if sp.Restart.Condition, err = parseEnum("restart.condition", r.Condition, statemachine.RestartAny,
			statemachine.RestartAny, statemachine.RestartOnFailure, statemachine.RestartNone); err != nil {
			return sp, err
		}
		if r.Delay != nil {
			sp.Restart.Delay = int64(*r.Delay)
		}
		sp.Restart.MaxAttempts, sp.Restart.Window = r.MaxAttempts, int64(r.Window)
	}
	if sp.Update, err = toUpdateConfig("update", d.Update, statemachine.ActionPause,
		statemachine.ActionContinue, statemachine.ActionRollback); err != nil {
		return sp, err
	}
	if sp.Rollback, err = toUpdateConfig("rollback", d.Rollback, statemachine.ActionPause,
		statemachine.ActionContinue); err != nil {
		return sp, err
	}
	if len(d.Labels) > 0 {
		sp.Labels = d.Labels
	}
	if dc := d.Disconnect; dc != nil {
		sp.Disconnect.LostAfter, sp.Disconnect.NoReplace = int64(dc.LostAfter), dc.NoReplace
		if sp.Disconnect.Reconcile, err = parseEnum("disconnect.reconcile", dc.Reconcile, statemachine.ReconcileBestScore,
			statemachine.ReconcileBestScore, statemachine.ReconcileKeepOriginal,
			statemachine.ReconcileKeepReplacement, statemachine.ReconcileLongestRunning); err != nil {
			return sp, err
		}
	}
	if p := d.Placement; p != nil {
		sp.Placement.Preferences, sp.Placement.MaxPerNode = p.Preferences, p.MaxReplicasPerNode
		if sp.Placement.Strategy, err = parseEnum("placement.strategy", p.Strategy, statemachine.StrategySpread,
			statemachine.StrategySpread, statemachine.StrategyBinPack); err != nil {
			return sp, err
		}
	}
	if r := statemachine.ValidateSpec(&sp); r.Code != statemachine.CodeOK {
		return sp, invalidSpec("", "%s", r.Msg)
	}
	return sp, nil
}

// toUpdateConfig reads an update or rollback configuration (field names
// it), filling SwarmKit's defaults: one task at a time, monitor 5s, no
// delay, the first of actions on failure, stop-first.
func toUpdateConfig(field string, u *client.UpdateConfig, actions ...statemachine.FailureAction) (statemachine.UpdateConfig, error) {
	c := statemachine.UpdateConfig{Parallelism: defaultParallelism, Monitor: int64(defaultMonitor)}
	if u == nil {
		return c, nil
	}
	var err error
	if u.Parallelism != nil {
		c.Parallelism = *u.Parallelism
	}
	if u.Monitor != nil {
		c.Monitor = int64(*u.Monitor)
	}
	c.Delay, c.MaxFailureRatio = int64(u.Delay), u.MaxFailureRatio
	if c.FailureAction, err = parseEnum(field+".failure_action", u.FailureAction, actions[0], actions...); err != nil {
		return c, err
	}
	if c.Order, err = parseEnum(field+".order", u.Order, statemachine.StopFirst,
		statemachine.StopFirst, statemachine.StartFirst); err != nil {
		return c, err
	}
	return c, nil
}

func fromUpdateConfig(u statemachine.UpdateConfig) *client.UpdateConfig {
	par, mon := u.Parallelism, client.Duration(u.Monitor)
	return &client.UpdateConfig{Parallelism: &par, Delay: client.Duration(u.Delay),
		FailureAction: u.FailureAction.String(), Monitor: &mon,
		MaxFailureRatio: u.MaxFailureRatio, Order: u.Order.String()}
}

// fromSpec renders a stored spec as the user's document (defaults shown).
func fromSpec(sp *statemachine.ServiceSpec) client.ServiceSpec {
	d := client.ServiceSpec{Name: sp.Name, Mode: sp.Mode.String(), Image: sp.Image,
		Command: sp.Command, Env: sp.Env, Dir: sp.Dir, Networks: sp.Networks, Constraints: sp.Constraints,
		Reserve: client.Resources{CPU: sp.CPU, Memory: sp.Memory}}
	if sp.Mode == statemachine.ModeReplicated {
		r := sp.Replicas
		d.Replicas = &r
	}
	if sp.StopGrace != 0 {
		g := client.Duration(sp.StopGrace)
		d.StopGrace = &g
	}
	delay := client.Duration(sp.Restart.Delay)
	d.Restart = &client.RestartPolicy{Condition: sp.Restart.Condition.String(), Delay: &delay,
		MaxAttempts: sp.Restart.MaxAttempts, Window: client.Duration(sp.Restart.Window)}
	d.Update, d.Rollback = fromUpdateConfig(sp.Update), fromUpdateConfig(sp.Rollback)
	d.Labels = sp.Labels
	if sp.Disconnect != (statemachine.DisconnectPolicy{}) {
		d.Disconnect = &client.Disconnect{LostAfter: client.Duration(sp.Disconnect.LostAfter),
			NoReplace: sp.Disconnect.NoReplace, Reconcile: sp.Disconnect.Reconcile.String()}
	}
	if pl := sp.Placement; len(pl.Preferences) > 0 || pl.MaxPerNode > 0 || pl.Strategy != statemachine.StrategySpread {
		d.Placement = &client.Placement{Preferences: pl.Preferences, MaxReplicasPerNode: pl.MaxPerNode,
			Strategy: pl.Strategy.String()}
	}
	return d
}

// NormalizeSpec returns d as the manager would store and show it: every
// default filled in, in the form `service inspect` prints. Two documents
// with the same normal form declare the same service (a stack deploy
// compares them to leave unchanged services alone).
func NormalizeSpec(d client.ServiceSpec) (client.ServiceSpec, error) {
	sp, err := toSpec(&d)
	if err != nil {
		return client.ServiceSpec{}, err
	}
	return fromSpec(&sp), nil
}
