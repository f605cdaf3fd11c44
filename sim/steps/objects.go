package steps

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"shoal/sim/dialect"
	sm "shoal/statemachine"
)

// The directives that declare objects: nodes, networks, services (see
// the verb list in runner.go).

var (
	nodeStatuses   = []string{"ready", "disconnected", "initializing", "down"}
	availabilities = []string{"active", "pause", "drain"}
	restarts       = []string{"any", "on-failure", "none"}
	modes          = []string{"replicated", "global"}
)

func parseEnum[T ~uint8](what, s string, names ...string) (T, error) {
	for i, n := range names {
		if n == s {
			return T(i), nil
		}
	}
	return 0, fmt.Errorf("unknown %s %q (want one of %s)", what, s, strings.Join(names, ", "))
}

func (r *runner) cmdNode(op dialect.Op) (string, error) {
	a, err := parseArgs(op, 1, "cpu", "mem", "labels", "status", "availability")
	if err != nil {
		return "", err
	}
	id := r.node(a.pos[0])
	spec := &sm.Node{ID: id, Name: a.pos[0], Role: sm.RoleWorker, Labels: map[string]string{}}
	if old := r.s.Node(id); old != nil {
		spec.CPU, spec.Memory, spec.Availability = old.CPU, old.Memory, old.Availability
		for k, v := range old.Labels {
			spec.Labels[k] = v
		}
	}
	if v, ok := a.kv["cpu"]; ok {
		if spec.CPU, err = strconv.ParseInt(v, 10, 64); err != nil {
			return "", err
		}
	}
	if v, ok := a.kv["mem"]; ok {
		if spec.Memory, err = dialect.Size(v); err != nil {
			return "", err
		}
	}
	if v, ok := a.kv["labels"]; ok {
		labels, err := dialect.Labels(v)
		if err != nil {
			return "", err
		}
		maps.Copy(spec.Labels, labels)
	}
	if v, ok := a.kv["status"]; ok {
		if spec.Status, err = parseEnum[sm.NodeStatus]("node status", v, nodeStatuses...); err != nil {
			return "", err
		}
	}
	if v, ok := a.kv["availability"]; ok {
		if spec.Availability, err = parseEnum[sm.Availability]("availability", v, availabilities...); err != nil {
			return "", err
		}
	}
	out := r.apply(sm.Command{Kind: sm.CmdUpsertNode, NodeSpec: spec})
	r.syncMonitor()
	return out, nil
}

func (r *runner) cmdNodeStatus(op dialect.Op) (string, error) {
	a, err := parseArgs(op, 2)
	if err != nil {
		return "", err
	}
	st, err := parseEnum[sm.NodeStatus]("node status", a.pos[1], nodeStatuses...)
	if err != nil {
		return "", err
	}
	id := r.node(a.pos[0])
	out := r.apply(sm.Command{Kind: sm.CmdSetNodeStatus, Node: id, NodeStatus: st})
	r.syncMonitor()
	return out, nil
}

func (r *runner) cmdAvailability(op dialect.Op) (string, error) {
	a, err := parseArgs(op, 2)
	if err != nil {
		return "", err
	}
	av, err := parseEnum[sm.Availability]("availability", a.pos[1], availabilities...)
	if err != nil {
		return "", err
	}
	return r.apply(sm.Command{Kind: sm.CmdSetAvailability, Node: r.node(a.pos[0]), Availability: av}), nil
}

func (r *runner) cmdNetwork(op dialect.Op) (string, error) {
	a, err := parseArgs(op, 1, "subnet")
	if err != nil {
		return "", err
	}
	id := sm.NetworkID(len(r.nets) + 1)
	out := r.apply(sm.Command{Kind: sm.CmdCreateNetwork,
		NetworkSpec: &sm.Network{ID: id, Name: a.pos[0], Subnet: a.kv["subnet"]}})
	if r.s.Pool(id) != nil {
		r.nets = append(r.nets, a.pos[0])
	}
	return out, nil
}

func splitList(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

func (r *runner) cmdService(op dialect.Op) (string, error) {
	a, err := parseArgs(op, 1, append([]string{"replicas", "mode", "restart", "networks", "image", "constraints",
		"delay", "max-attempts", "window", "lost-after", "replace", "reconcile",
		"preferences", "max-per-node", "strategy", "cpu", "mem"}, append(updateKeys, rollbackKeys...)...)...)
	if err != nil {
		return "", err
	}
	spec := sm.ServiceSpec{Name: a.pos[0], Replicas: 1}
	kind := sm.CmdCreateService
	if op.Cmd == "update-service" {
		kind = sm.CmdUpdateService
		svc := r.s.ServiceByName(a.pos[0])
		if svc == nil {
			return "", fmt.Errorf("service %q does not exist", a.pos[0])
		}
		spec = svc.Spec
		spec.Networks = slices.Clone(spec.Networks)
		spec.Constraints = slices.Clone(spec.Constraints)
		spec.Placement.Preferences = slices.Clone(spec.Placement.Preferences)
	}
	if v, ok := a.kv["cpu"]; ok {
		if spec.CPU, err = strconv.ParseInt(v, 10, 64); err != nil {
			return "", fmt.Errorf("cpu wants milli-cores, got %q", v)
		}
	}
	if v, ok := a.kv["mem"]; ok {
		if spec.Memory, err = dialect.Size(v); err != nil {
			return "", fmt.Errorf("mem wants a size such as 64M, got %q", v)
		}
	}
	if v, ok := a.kv["preferences"]; ok {
		spec.Placement.Preferences = splitList(v)
	}
	if v, ok := a.kv["max-per-node"]; ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return "", fmt.Errorf("max-per-node wants a count, got %q", v)
		}
		spec.Placement.MaxPerNode = uint32(n)
	}
	if v, ok := a.kv["strategy"]; ok {
		if spec.Placement.Strategy, err = parseEnum[sm.PlacementStrategy]("strategy", v, "spread", "binpack"); err != nil {
			return "", err
		}
	}
	if v, ok := a.kv["replicas"]; ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return "", err
		}
		spec.Replicas = uint32(n)
	}
	if v, ok := a.kv["mode"]; ok {
		if spec.Mode, err = parseEnum[sm.ServiceMode]("mode", v, modes...); err != nil {
			return "", err
		}
	}
	if v, ok := a.kv["restart"]; ok {
		if spec.Restart.Condition, err = parseEnum[sm.RestartCondition]("restart condition", v, restarts...); err != nil {
			return "", err
		}
	}
	if err := parseUpdateArgs(a, updateKeys, &spec.Update); err != nil {
		return "", err
	}
	if err := parseRollbackArgs(a, kind == sm.CmdCreateService, &spec); err != nil {
		return "", err
	}
	if v, ok := a.kv["replace"]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return "", fmt.Errorf("replace wants true or false, got %q", v)
		}
		spec.Disconnect.NoReplace = !b
	}
	if v, ok := a.kv["reconcile"]; ok {
		if spec.Disconnect.Reconcile, err = parseEnum[sm.ReconcileMode]("reconcile", v, "best_score", "keep_original", "keep_replacement", "longest_running"); err != nil {
			return "", err
		}
	}
	for key, dst := range map[string]*int64{"delay": &spec.Restart.Delay, "window": &spec.Restart.Window, "lost-after": &spec.Disconnect.LostAfter} {
		if v, ok := a.kv[key]; ok {
			dur, err := time.ParseDuration(v)
			if err != nil || dur < 0 {
				return "", fmt.Errorf("%s wants a duration such as 5s, got %q", key, v)
			}
			*dst = int64(dur)
		}
	}
	if v, ok := a.kv["max-attempts"]; ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return "", fmt.Errorf("max-attempts wants a count, got %q", v)
		}
		spec.Restart.MaxAttempts = uint32(n)
	}
	if v, ok := a.kv["networks"]; ok {
		spec.Networks = splitList(v)
	}
	if v, ok := a.kv["image"]; ok {
		spec.Image = v
	}
	if v, ok := a.kv["constraints"]; ok {
		spec.Constraints = splitList(v)
	}
	return r.apply(sm.Command{Kind: kind, Spec: &spec}), nil
}
