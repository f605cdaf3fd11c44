package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"shoal/api/client"
)

// specFlags are the flags of `service create` and `service update` that
// make or change a spec (docs/service-flags.md lists them). On create
// every flag counts, with its default; on update only the flags given
// change the service's spec as it is stored.
type specFlags struct {
	replicas     uint32
	mode         string
	networks     []string
	constraints  []string
	env          []string
	dir          string
	restartCond  string
	restartDelay time.Duration
	restartMax   uint32
	restartWin   time.Duration
	update       updateFlags
	rollback     updateFlags
	reserveCPU   float64
	reserveMem   string
	stopGrace    time.Duration
	prefs        []string
	maxPerNode   uint32
	strategy     string
	labels       []string
	lostAfter    time.Duration
	noReplace    bool
	reconcile    string
	// update only: edits of the lists and maps
	envAdd, envRm, conAdd, conRm, prefAdd, prefRm, labelAdd, labelRm []string
	detach                                                           bool
	timeout                                                          time.Duration
}

// updateFlags are one update or rollback configuration's flags
// (--update-* or --rollback-*).
type updateFlags struct {
	parallelism uint32
	delay       time.Duration
	monitor     time.Duration
	ratio       float64
	action      string
	order       string
}

func (u *updateFlags) add(cmd *cobra.Command, prefix, what, actions string) {
	fl := cmd.Flags()
	fl.Uint32Var(&u.parallelism, prefix+"-parallelism", 1, "tasks "+what+" at once (0: all)")
	fl.DurationVar(&u.delay, prefix+"-delay", 0, "delay between "+what+" tasks")
	fl.DurationVar(&u.monitor, prefix+"-monitor", 5*time.Second, "how long after a task starts its failure counts against the "+prefix)
	fl.Float64Var(&u.ratio, prefix+"-max-failure-ratio", 0, "fraction of tasks that may fail before the failure action (0 to 1)")
	fl.StringVar(&u.action, prefix+"-failure-action", "pause", "what a failing "+prefix+" does: "+actions)
	fl.StringVar(&u.order, prefix+"-order", "stop-first", "stop-first or start-first")
}

// apply writes the flags of prefix that are set (all of them when all)
// into *cfg, creating it when nil.
func (u *updateFlags) apply(cmd *cobra.Command, prefix string, all bool, cfg **client.UpdateConfig) error {
	set := func(name string) bool { return all || cmd.Flags().Changed(prefix+"-"+name) }
	if *cfg == nil {
		*cfg = &client.UpdateConfig{}
	}
	c := *cfg
	if set("parallelism") {
		p := u.parallelism
		c.Parallelism = &p
	}
	if set("delay") {
		if u.delay < 0 {
			return fmt.Errorf("--%s-delay %s: give a duration of 0 or more", prefix, u.delay)
		}
		c.Delay = client.Duration(u.delay)
	}
	if set("monitor") {
		if u.monitor < 0 {
			return fmt.Errorf("--%s-monitor %s: give a duration of 0 or more", prefix, u.monitor)
		}
		m := client.Duration(u.monitor)
		c.Monitor = &m
	}
	if set("max-failure-ratio") {
		if !(u.ratio >= 0 && u.ratio <= 1) {
			return fmt.Errorf("--%s-max-failure-ratio %g: give a fraction from 0 to 1 (0.2 = a fifth of the tasks)", prefix, u.ratio)
		}
		c.MaxFailureRatio = u.ratio
	}
	if set("failure-action") {
		actions := []string{"pause", "continue", "rollback"}
		if prefix == "rollback" {
			actions = actions[:2] // a rollback is never rolled back
		}
		if err := oneOf("--"+prefix+"-failure-action", u.action, actions...); err != nil {
			return err
		}
		c.FailureAction = u.action
	}
	if set("order") {
		if err := oneOf("--"+prefix+"-order", u.order, "stop-first", "start-first"); err != nil {
			return err
		}
		c.Order = u.order
	}
	return nil
}

// oneOf refuses a flag's value that is not among values, naming the flag
// and the values it takes, before anything is sent to the manager.
func oneOf(flag, value string, values ...string) error {
	if slices.Contains(values, value) {
		return nil
	}
	list := values[0]
	if n := len(values); n > 1 {
		list = strings.Join(values[:n-1], ", ") + " or " + values[n-1]
	}
	return fmt.Errorf("%s %q: use %s", flag, value, list)
}

func (f *specFlags) add(cmd *cobra.Command, create bool) {
	fl := cmd.Flags()
	fl.Uint32Var(&f.replicas, "replicas", 1, "number of tasks (replicated mode)")
	if create {
		fl.StringVar(&f.mode, "mode", "replicated", "replicated or global (one task per node)")
	}
	fl.StringSliceVar(&f.networks, "network", nil, "attach to a network (repeatable)")
	fl.StringSliceVar(&f.constraints, "constraint", nil, "placement constraint, e.g. node.labels.zone==a (repeatable; on update: replaces them all)")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "environment variable KEY=VALUE (repeatable; on update: replaces them all)")
	fl.StringVar(&f.dir, "workdir", "", "working directory of the task's process")
	fl.StringVar(&f.restartCond, "restart-condition", "any", "restart when a task exits: any, on-failure or none")
	fl.DurationVar(&f.restartDelay, "restart-delay", 5*time.Second, "delay between restarts")
	fl.Uint32Var(&f.restartMax, "restart-max-attempts", 0, "restarts per slot before giving up (0: unlimited)")
	fl.DurationVar(&f.restartWin, "restart-window", 0, "window the restart attempts are counted in (0: forever)")
	f.update.add(cmd, "update", "updated", "pause, continue or rollback")
	f.rollback.add(cmd, "rollback", "rolled back", "pause or continue")
	fl.Float64Var(&f.reserveCPU, "reserve-cpu", 0, "CPUs reserved per task (e.g. 0.5)")
	fl.StringVar(&f.reserveMem, "reserve-memory", "0", "memory reserved per task: bytes, or with a unit: 512M, 1.5G (K, M, G, T are powers of 1024)")
	fl.DurationVar(&f.stopGrace, "stop-grace-period", 10*time.Second, "time between SIGTERM and SIGKILL when stopping a task")
	fl.StringArrayVar(&f.prefs, "placement-pref", nil, "spread the tasks over a node label's values, e.g. spread=node.labels.zone (repeatable, outermost first)")
	fl.Uint32Var(&f.maxPerNode, "replicas-max-per-node", 0, "most tasks of the service on one node (0: no limit)")
	fl.StringVar(&f.strategy, "placement-strategy", "spread", "spread (least-loaded nodes first) or binpack (fill the fullest node that fits)")
	fl.StringArrayVarP(&f.labels, "label", "l", nil, "service label KEY=VALUE (repeatable; on update: adds or changes the key)")
	fl.DurationVar(&f.lostAfter, "disconnect-lost-after", 0, "how long tasks on a disconnected node stay unknown before they are lost (0: replaced at once, as on a down node)")
	fl.BoolVar(&f.noReplace, "disconnect-no-replace", false, "hold a disconnected task's slot instead of placing a replacement at once")
	fl.StringVar(&f.reconcile, "disconnect-reconcile", "best_score", "which of original and replacement survives a reconnect: best_score, keep_original, keep_replacement or longest_running")
	if !create {
		fl.StringArrayVar(&f.envAdd, "env-add", nil, "add or change an environment variable KEY=VALUE (repeatable)")
		fl.StringArrayVar(&f.envRm, "env-rm", nil, "remove an environment variable by KEY (repeatable)")
		fl.StringArrayVar(&f.conAdd, "constraint-add", nil, "add a placement constraint (repeatable)")
		fl.StringArrayVar(&f.conRm, "constraint-rm", nil, "remove a placement constraint, written as it was added (repeatable)")
		fl.StringArrayVar(&f.prefAdd, "placement-pref-add", nil, "add a placement preference, e.g. spread=node.labels.rack (repeatable)")
		fl.StringArrayVar(&f.prefRm, "placement-pref-rm", nil, "remove a placement preference, e.g. spread=node.labels.zone (repeatable)")
		fl.StringArrayVar(&f.labelRm, "label-rm", nil, "remove a service label by KEY (repeatable)")
		fl.StringArrayVar(&f.labelAdd, "label-add", nil, "add or change a service label KEY=VALUE (repeatable; same as --label)")
	}
	fl.BoolVarP(&f.detach, "detach", "d", false, "return once the change is stored, without waiting for tasks to converge")
	fl.DurationVar(&f.timeout, "timeout", 2*time.Minute, "how long to wait for convergence")
}

// apply writes the flags the user set (all of them on create) into spec,
// or says which flag is wrong and what it wants.
func (f *specFlags) apply(cmd *cobra.Command, spec *client.ServiceSpec, create bool) error {
	changed := cmd.Flags().Changed
	set := func(name string) bool { return create || changed(name) }
	if (create && f.mode != "global") || (!create && changed("replicas")) {
		r := f.replicas
		spec.Replicas = &r
	}
	if set("network") {
		spec.Networks = f.networks
	}
	if set("constraint") {
		spec.Constraints = f.constraints
	}
	if set("env") {
		for _, kv := range f.env {
			if err := checkKeyValue("--env", kv); err != nil {
				return err
			}
		}
		spec.Env = f.env
	}
	if set("workdir") {
		spec.Dir = f.dir
	}
	if spec.Restart == nil {
		spec.Restart = &client.RestartPolicy{}
	}
	if set("restart-condition") {
		if err := oneOf("--restart-condition", f.restartCond, "any", "on-failure", "none"); err != nil {
			return err
		}
		spec.Restart.Condition = f.restartCond
	}
	if set("restart-delay") {
		d := client.Duration(f.restartDelay)
		spec.Restart.Delay = &d
	}
	if set("restart-max-attempts") {
		spec.Restart.MaxAttempts = f.restartMax
	}
	if set("restart-window") {
		spec.Restart.Window = client.Duration(f.restartWin)
	}
	if err := f.update.apply(cmd, "update", create, &spec.Update); err != nil {
		return err
	}
	if err := f.rollback.apply(cmd, "rollback", create, &spec.Rollback); err != nil {
		return err
	}
	if set("reserve-cpu") {
		if f.reserveCPU < 0 {
			return fmt.Errorf("--reserve-cpu %g: give 0 or more CPUs (0.5 = half a core)", f.reserveCPU)
		}
		spec.Reserve.CPU = int64(f.reserveCPU * 1000)
	}
	if set("reserve-memory") {
		n, err := units.RAMInBytes(f.reserveMem)
		if err != nil || n < 0 {
			return fmt.Errorf("--reserve-memory %q: give bytes or a size such as 512M or 1.5G", f.reserveMem)
		}
		spec.Reserve.Memory = n
	}
	if set("stop-grace-period") {
		if f.stopGrace < 0 {
			return fmt.Errorf("--stop-grace-period %s: give a duration of 0 or more", f.stopGrace)
		}
		g := client.Duration(f.stopGrace)
		spec.StopGrace = &g
	}
	if err := f.applyPlacement(cmd, spec, create); err != nil {
		return err
	}
	if err := f.applyLabels(spec); err != nil {
		return err
	}
	if !create {
		var err error
		if spec.Env, err = editKeyValues("--env", spec.Env, f.envAdd, f.envRm); err != nil {
			return err
		}
		spec.Constraints = editList(spec.Constraints, f.conAdd, f.conRm)
	}
	if changed("disconnect-lost-after") || changed("disconnect-no-replace") || changed("disconnect-reconcile") {
		if spec.Disconnect == nil {
			spec.Disconnect = &client.Disconnect{}
		}
		if changed("disconnect-lost-after") {
			if f.lostAfter < 0 {
				return fmt.Errorf("--disconnect-lost-after %s: give a duration of 0 or more", f.lostAfter)
			}
			spec.Disconnect.LostAfter = client.Duration(f.lostAfter)
		}
		if changed("disconnect-no-replace") {
			spec.Disconnect.NoReplace = f.noReplace
		}
		if changed("disconnect-reconcile") {
			if err := oneOf("--disconnect-reconcile", f.reconcile, "best_score", "keep_original", "keep_replacement", "longest_running"); err != nil {
				return err
			}
			spec.Disconnect.Reconcile = f.reconcile
		}
	}
	return nil
}

// applyPlacement writes --placement-pref(-add/-rm), --replicas-max-per-node
// and --placement-strategy.
func (f *specFlags) applyPlacement(cmd *cobra.Command, spec *client.ServiceSpec, create bool) error {
	changed := cmd.Flags().Changed
	if !create && !changed("placement-pref") && !changed("placement-pref-add") && !changed("placement-pref-rm") &&
		!changed("replicas-max-per-node") && !changed("placement-strategy") {
		return nil
	}
	if spec.Placement == nil {
		spec.Placement = &client.Placement{}
	}
	p := spec.Placement
	prefs := func(flag string, in []string) ([]string, error) {
		var out []string
		for _, v := range in {
			pref, err := parsePlacementPref(flag, v)
			if err != nil {
				return nil, err
			}
			out = append(out, pref)
		}
		return out, nil
	}
	if create || changed("placement-pref") {
		v, err := prefs("--placement-pref", f.prefs)
		if err != nil {
			return err
		}
		p.Preferences = v
	}
	add, err := prefs("--placement-pref-add", f.prefAdd)
	if err != nil {
		return err
	}
	rm, err := prefs("--placement-pref-rm", f.prefRm)
	if err != nil {
		return err
	}
	p.Preferences = editList(p.Preferences, add, rm)
	if create || changed("replicas-max-per-node") {
		p.MaxReplicasPerNode = f.maxPerNode
	}
	if create || changed("placement-strategy") {
		if err := oneOf("--placement-strategy", f.strategy, "spread", "binpack"); err != nil {
			return err
		}
		p.Strategy = f.strategy
	}
	return nil
}

// parsePlacementPref reads docker's spread=node.labels.KEY (the bare
// node.labels.KEY too) into the API's preference.
func parsePlacementPref(flag, v string) (string, error) {
	pref := v
	if kind, val, ok := strings.Cut(v, "="); ok {
		if kind != "spread" {
			return "", fmt.Errorf("%s %q: only spread preferences exist: use spread=node.labels.KEY", flag, v)
		}
		pref = val
	}
	if key, ok := strings.CutPrefix(pref, "node.labels."); !ok || key == "" {
		return "", fmt.Errorf("%s %q: spread over a node label: use spread=node.labels.KEY", flag, v)
	}
	return pref, nil
}

// applyLabels merges --label/--label-add into the spec's labels and drops
// --label-rm's keys.
func (f *specFlags) applyLabels(spec *client.ServiceSpec) error {
	if len(f.labels) == 0 && len(f.labelAdd) == 0 && len(f.labelRm) == 0 {
		return nil
	}
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	for _, kv := range append(slices.Clone(f.labels), f.labelAdd...) {
		k, v, _ := strings.Cut(kv, "=")
		if k == "" {
			return fmt.Errorf("--label %q: give KEY=VALUE (or KEY for an empty value)", kv)
		}
		labels[k] = v
	}
	for _, k := range f.labelRm {
		delete(labels, k)
	}
	spec.Labels = labels
	return nil
}

func checkKeyValue(flag, kv string) error {
	if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
		return fmt.Errorf("%s %q: give KEY=VALUE", flag, kv)
	}
	return nil
}

// editKeyValues sets each of add's KEY=VALUE in list (replacing the
// entry of the same KEY, else appending) and drops the entries whose KEY
// is in rm.
func editKeyValues(flag string, list, add, rm []string) ([]string, error) {
	if len(add) == 0 && len(rm) == 0 {
		return list, nil
	}
	key := func(kv string) string { k, _, _ := strings.Cut(kv, "="); return k }
	out := slices.Clone(list)
	for _, kv := range add {
		if err := checkKeyValue(flag+"-add", kv); err != nil {
			return nil, err
		}
		if i := slices.IndexFunc(out, func(e string) bool { return key(e) == key(kv) }); i >= 0 {
			out[i] = kv
		} else {
			out = append(out, kv)
		}
	}
	return slices.DeleteFunc(out, func(e string) bool { return slices.Contains(rm, key(e)) }), nil
}

// editList appends add's entries not yet in list and drops rm's.
func editList(list, add, rm []string) []string {
	if len(add) == 0 && len(rm) == 0 {
		return list
	}
	out := slices.Clone(list)
	for _, v := range add {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return slices.DeleteFunc(out, func(e string) bool { return slices.Contains(rm, e) })
}
