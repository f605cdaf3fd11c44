package steps

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"shoal/sim/dialect"
	sm "shoal/statemachine"
)

// The directives that declare objects: nodes, networks, services (see
// the verb list in runner.go).

var (
	nodeStatuses   = []string{"ready", "disconnected", "initializing", "down"}
	availabilities = []string{"active", "pause", "drain"}
)

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
		if spec.Status, err = dialect.Enum[sm.NodeStatus]("node status", v, nodeStatuses...); err != nil {
			return "", err
		}
	}
	if v, ok := a.kv["availability"]; ok {
		if spec.Availability, err = dialect.Enum[sm.Availability]("availability", v, availabilities...); err != nil {
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
	st, err := dialect.Enum[sm.NodeStatus]("node status", a.pos[1], nodeStatuses...)
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
	av, err := dialect.Enum[sm.Availability]("availability", a.pos[1], availabilities...)
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

func (r *runner) cmdService(op dialect.Op) (string, error) {
	a, err := parseArgs(op, 1, dialect.ServiceKeys...)
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
	if err := dialect.ServiceSpec(op, &spec, kind == sm.CmdCreateService); err != nil {
		return "", err
	}
	return r.apply(sm.Command{Kind: kind, Spec: &spec}), nil
}
