package statemachine

import (
	"maps"
	"slices"
	"strings"

	"shoal/internal/taskref"
	"shoal/sched"
)

// Limits on user input, so one bad command cannot bloat every replica.
const (
	maxNameLen  = 63
	maxReplicas = 1 << 20
	maxLabels   = 64
	maxLabelLen = 1024
)

func validName(name string) bool {
	if name == "" || len(name) > maxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || (c >= 'A' && c <= 'Z')) {
			return false
		}
	}
	return true
}

// ValidateSpec says what is wrong with a service spec, as the command
// creating it would be rejected (Msg is written for users; Err wraps the
// code's sentinel), or returns a Result with CodeOK.
func ValidateSpec(spec *ServiceSpec) Result { return validateSpec(spec) }

func validateSpec(spec *ServiceSpec) Result {
	if spec == nil {
		return reject(CodeInvalid, "missing service spec")
	}
	if !validName(spec.Name) {
		return reject(CodeInvalid, "service name %q: use 1-%d letters, digits, '-' or '_'", spec.Name, maxNameLen)
	}
	if spec.Mode > ModeGlobal {
		return reject(CodeInvalid, "service %q: unknown mode %d", spec.Name, spec.Mode)
	}
	if spec.Mode == ModeReplicated && spec.Replicas > maxReplicas {
		return reject(CodeInvalid, "service %q: %d replicas is more than the limit of %d", spec.Name, spec.Replicas, maxReplicas)
	}
	if spec.Restart.Condition > RestartNone {
		return reject(CodeInvalid, "service %q: unknown restart condition %d", spec.Name, spec.Restart.Condition)
	}
	if spec.Restart.Delay < 0 || spec.Restart.Window < 0 {
		return reject(CodeInvalid, "service %q: restart delay and window must not be negative", spec.Name)
	}
	if spec.CPU < 0 || spec.Memory < 0 {
		return reject(CodeInvalid, "service %q: CPU and memory reservations must not be negative", spec.Name)
	}
	if spec.StopGrace < 0 {
		return reject(CodeInvalid, "service %q: stop grace period must not be negative", spec.Name)
	}
	for _, kv := range spec.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return reject(CodeInvalid, "service %q: environment entry %q is not KEY=VALUE", spec.Name, kv)
		}
	}
	if u := spec.Update; !u.valid() || u.FailureAction >= numFailureActions {
		return reject(CodeInvalid, "service %q: update delay and monitor must not be negative, max failure ratio must be in [0,1], failure action pause, continue or rollback", spec.Name)
	}
	if u := spec.Rollback; !u.valid() || u.FailureAction == ActionRollback || u.FailureAction >= numFailureActions {
		return reject(CodeInvalid, "service %q: rollback delay and monitor must not be negative, max failure ratio must be in [0,1], failure action pause or continue", spec.Name)
	}
	for k, v := range spec.Labels {
		if k == "" || strings.ContainsAny(k, "=\x00") || len(k)+len(v) > maxLabelLen {
			return reject(CodeInvalid, "service %q: label %q: a key is 1 or more characters without '=', key and value at most %d bytes together", spec.Name, k, maxLabelLen)
		}
	}
	if len(spec.Labels) > maxLabels {
		return reject(CodeInvalid, "service %q: %d labels is more than the limit of %d", spec.Name, len(spec.Labels), maxLabels)
	}
	if spec.Disconnect.LostAfter < 0 || spec.Disconnect.Reconcile >= numReconcileModes {
		return reject(CodeInvalid, "service %q: disconnect lost_after must not be negative and reconcile must be one of %v", spec.Name, reconcileNames)
	}
	if _, err := sched.ParseConstraints(spec.Constraints); err != nil {
		return reject(CodeInvalid, "service %q: %v", spec.Name, err)
	}
	if err := sched.CheckPreferences(spec.Placement.Preferences); err != nil {
		return reject(CodeInvalid, "service %q: %v", spec.Name, err)
	}
	if spec.Placement.Strategy >= numStrategies {
		return reject(CodeInvalid, "service %q: placement strategy must be one of %v", spec.Name, strategyNames)
	}
	return Result{}
}

func cloneSpec(spec *ServiceSpec) ServiceSpec {
	c := *spec
	c.Constraints = slices.Clone(spec.Constraints)
	c.Networks = slices.Clone(spec.Networks)
	c.Command = slices.Clone(spec.Command)
	c.Env = slices.Clone(spec.Env)
	c.Placement.Preferences = slices.Clone(spec.Placement.Preferences)
	c.Labels = maps.Clone(spec.Labels)
	return c
}

func (s *State) checkNetworks(spec *ServiceSpec) Result {
	for _, name := range spec.Networks {
		if s.networkByName(name) == nil {
			return reject(CodeNotFound, "service %q: network %q does not exist; create it first", spec.Name, name)
		}
	}
	return Result{}
}

func (s *State) createService(spec *ServiceSpec) Result {
	if r := validateSpec(spec); r.Code != CodeOK {
		return r
	}
	if old := s.ServiceByName(spec.Name); old != nil {
		if old.Remove {
			return reject(CodeExists, "service %q is being removed; wait until its tasks are gone", spec.Name)
		}
		return reject(CodeExists, "service %q already exists", spec.Name)
	}
	if r := s.checkNetworks(spec); r.Code != CodeOK {
		return r
	}
	svc := &Service{ID: s.nextService, Spec: cloneSpec(spec), SpecVersion: 1}
	s.nextService++
	if r := s.allocateVIPs(svc); r.Code != CodeOK {
		s.releaseVIPs(svc)
		return r
	}
	s.services[svc.ID] = svc
	s.serviceByName[spec.Name] = svc.ID
	svc.ModifyIndex = s.index
	s.markDirty(svc)
	s.emit(Effect{Kind: EffServiceChanged, Service: svc.ID})
	return Result{ID: uint64(svc.ID)}
}

func (s *State) updateService(spec *ServiceSpec, checkIndex uint64) Result {
	if r := validateSpec(spec); r.Code != CodeOK {
		return r
	}
	svc := s.ServiceByName(spec.Name)
	if svc == nil {
		return reject(CodeNotFound, "service %q does not exist", spec.Name)
	}
	if checkIndex != 0 && checkIndex != svc.ModifyIndex {
		return reject(CodeStale, "service %q was changed at index %d since index %d; read it again and retry", spec.Name, svc.ModifyIndex, checkIndex)
	}
	if svc.Remove {
		return reject(CodeNotAllowed, "service %q is being removed", spec.Name)
	}
	if spec.Mode != svc.Spec.Mode {
		return reject(CodeInvalid, "service %q: mode cannot change from %s to %s", spec.Name, svc.Spec.Mode, spec.Mode)
	}
	if r := s.checkNetworks(spec); r.Code != CodeOK {
		return r
	}
	prev := svc.Spec
	next := cloneSpec(spec)
	if r := s.allocateVIPs(&Service{ID: svc.ID, Spec: next}); r.Code != CodeOK {
		return r // VIPs already taken for new networks stay with the service until it is deleted
	}
	if !specChangesTasks(&prev, &next) {
		svc.Spec = next // a scale: same tasks, different count
	} else {
		svc.PrevSpec = &prev
		svc.Spec = next
		svc.SpecVersion++
		s.recountRunning(svc)
		s.beginUpdate(svc, false)
	}
	s.requeueUnknown(svc, prev.Disconnect)
	svc.ModifyIndex = s.index
	s.markDirty(svc)
	s.emit(Effect{Kind: EffServiceChanged, Service: svc.ID})
	return Result{ID: uint64(svc.ID)}
}

// specChangesTasks reports whether running tasks must be replaced to match
// next (anything but the replica count).
func specChangesTasks(prev, next *ServiceSpec) bool {
	a, b := *prev, *next
	a.Replicas, b.Replicas = 0, 0
	return a.Image != b.Image || a.Restart != b.Restart || a.CPU != b.CPU || a.Memory != b.Memory ||
		!slices.Equal(a.Constraints, b.Constraints) || !slices.Equal(a.Networks, b.Networks) ||
		!slices.Equal(a.Command, b.Command) || !slices.Equal(a.Env, b.Env) || a.Dir != b.Dir || a.StopGrace != b.StopGrace
}

func (s *State) removeService(name string) Result {
	svc := s.ServiceByName(name)
	if svc == nil {
		return reject(CodeNotFound, "service %q does not exist", name)
	}
	if svc.Remove {
		return Result{ID: uint64(svc.ID)} // already being removed
	}
	svc.Remove = true
	svc.ModifyIndex = s.index
	s.markDirty(svc)
	s.emit(Effect{Kind: EffServiceChanged, Service: svc.ID})
	return Result{ID: uint64(svc.ID)}
}

// markNodeServices queues the services with tasks on n, and every global
// service, for reconciling.
func (s *State) markNodeServices(n *Node) {
	for _, t := range n.tasks {
		s.markSlot(s.services[t.Service], t.Slot)
	}
	for _, id := range s.ServiceIDs() {
		if svc := s.services[id]; svc.Spec.Mode == ModeGlobal {
			s.markDirty(svc)
		}
	}
}

func (s *State) upsertNode(spec *Node) Result {
	if spec == nil || spec.ID == 0 {
		return reject(CodeInvalid, "node needs a non-zero ID")
	}
	if spec.Name == "" || len(spec.Name) > 253 {
		return reject(CodeInvalid, "node %d: name must be 1-253 characters", spec.ID)
	}
	if spec.Availability > AvailDrain || spec.Status > NodeDown {
		return reject(CodeInvalid, "node %d: unknown availability or status", spec.ID)
	}
	if spec.CPU < 0 || spec.Memory < 0 {
		return reject(CodeInvalid, "node %d: resources must not be negative", spec.ID)
	}
	n := s.nodes[spec.ID]
	if _, gone := s.removedNodes[spec.ID]; gone {
		return reject(CodeExists, "node id %d was removed; node IDs are never reused", spec.ID)
	}
	if spec.ID >= s.nextNode {
		s.nextNode = spec.ID + 1
	}
	if n == nil {
		n = &Node{ID: spec.ID, Status: spec.Status, StatusAt: s.now}
		s.nodes[spec.ID] = n
		s.nodeGen++
	}
	n.Name, n.Role, n.CPU, n.Memory, n.Availability = spec.Name, spec.Role, spec.CPU, spec.Memory, spec.Availability
	n.Labels = s.labelSet(spec.Labels)
	s.markNodeServices(n)
	s.emit(Effect{Kind: EffNodeChanged, Node: n.ID})
	return Result{ID: uint64(n.ID)}
}

// maxLabelSets bounds the distinct label sets a state shares among its
// nodes; a node with labels beyond them gets a map of its own.
const maxLabelSets = 1024

// labelSet returns a map equal to labels (never nil), shared by every
// node of this state with the same labels: a node's labels are replaced,
// never changed in place. 10,000 nodes with three distinct label sets held
// a map each in every group (37 MB of a replica's heap in a 10,000-agent
// run, the nodes' largest share).
func (s *State) labelSet(labels map[string]string) map[string]string {
	keys := slices.Sorted(maps.Keys(labels))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(labels[k])
		b.WriteByte(0)
	}
	key := b.String()
	if m, ok := s.labelSets[key]; ok {
		return m
	}
	m := make(map[string]string, len(labels))
	for k, v := range labels {
		m[k] = v
	}
	if s.labelSets == nil {
		s.labelSets = make(map[string]map[string]string)
	}
	if len(s.labelSets) < maxLabelSets {
		s.labelSets[key] = m
	}
	return m
}

// liveTaskOnNode refuses the removal of a down node that still has t
// unfinished (the submitter's check and the command say the same).
func liveTaskOnNode(id NodeID, t *Task) Result {
	return reject(CodeNotAllowed, "node %d still has task %s (%s): a down node's tasks are orphaned once it has been down for the orphan timeout (`shoal status` shows it); remove the node then, or bring its agent back",
		id, taskref.Short(uint64(t.ID)), t.Status.State)
}

func (s *State) removeNode(id NodeID) Result {
	n := s.nodes[id]
	if n == nil {
		return reject(CodeNotFound, "node %d does not exist", id)
	}
	if n.Status != NodeDown {
		return reject(CodeNotAllowed, "node %d is %s; only a down node can be removed", id, n.Status)
	}
	for _, t := range s.NodeTasks(id) { // in ID order: the message is the same on every replica
		if !t.Status.State.Terminal() {
			return liveTaskOnNode(id, t)
		}
	}
	for _, t := range slices.Clone(n.tasks) {
		s.detach(t)
	}
	delete(s.nodes, id)
	s.nodeGen++
	s.removedNodes[id] = struct{}{}
	s.forgetJoinKeys(id)
	// A removed node can never sync again: what it had quarantined is free
	// (its tasks are terminal; an orphaning freed it already, if any).
	s.expireNode(id)
	s.markNodeServices(n)
	s.emit(Effect{Kind: EffNodeChanged, Node: id})
	return Result{ID: uint64(id)}
}

// nodeStatusSteps lists the node status changes the node monitor may make.
var nodeStatusSteps = [numNodeStatuses][numNodeStatuses]bool{
	NodeReady:        {NodeDisconnected: true, NodeDown: true},
	NodeDisconnected: {NodeInitializing: true, NodeDown: true},
	NodeInitializing: {NodeReady: true, NodeDown: true, NodeDisconnected: true},
	NodeDown:         {NodeInitializing: true},
}

func (s *State) setNodeStatus(id NodeID, st NodeStatus) Result {
	n := s.nodes[id]
	if n == nil {
		return reject(CodeNotFound, "node %d does not exist", id)
	}
	if st > NodeDown {
		return reject(CodeInvalid, "node %d: unknown status %d", id, st)
	}
	if n.Status == st {
		return Result{ID: uint64(id)}
	}
	if !nodeStatusSteps[n.Status][st] {
		return reject(CodeNotAllowed, "node %d cannot go from %s to %s", id, n.Status, st)
	}
	old := n.Status
	n.Status, n.StatusAt = st, s.now
	s.nodeGen++
	s.nodeConnectivity(n, old, st)
	s.markNodeServices(n)
	s.emit(Effect{Kind: EffNodeChanged, Node: id})
	return Result{ID: uint64(id)}
}

func (s *State) setAvailability(id NodeID, a Availability) Result {
	n := s.nodes[id]
	if n == nil {
		return reject(CodeNotFound, "node %d does not exist", id)
	}
	if a > AvailDrain {
		return reject(CodeInvalid, "node %d: unknown availability %d", id, a)
	}
	n.Availability = a
	s.markNodeServices(n)
	s.emit(Effect{Kind: EffNodeChanged, Node: id})
	return Result{ID: uint64(id)}
}

// reserveNodeID hands out a node ID never used before in this cluster. Only
// the cluster group reserves IDs, so two managers registering nodes at once
// never pick the same one.
func (s *State) reserveNodeID(key string) Result {
	if s.cfg.Group != 0 {
		return reject(CodeInvalid, "node IDs are reserved by the cluster group only")
	}
	if id, ok := s.reserveKeyed(key); ok && key != "" {
		return Result{ID: uint64(id)}
	}
	id := max(s.nextNode, 1)
	for s.nodes[id] != nil || s.isRemoved(id) {
		id++
	}
	if id == 0 {
		return reject(CodeNotAllowed, "no node IDs left")
	}
	s.nextNode = id + 1
	if key != "" {
		s.joinKeys[key] = id
	}
	return Result{ID: uint64(id)}
}

// reserveNetworkID hands out a network ID no network of this cluster has
// had, for the same reason as reserveNodeID.
func (s *State) reserveNetworkID() Result {
	if s.cfg.Group != 0 {
		return reject(CodeInvalid, "network IDs are reserved by the cluster group only")
	}
	id := max(s.nextNetwork, 1)
	for s.networks[id] != nil {
		id++
	}
	if id == 0 {
		return reject(CodeNotAllowed, "no network IDs left")
	}
	s.nextNetwork = id + 1
	return Result{ID: uint64(id)}
}

// NodeRemoved reports whether node id was removed from the cluster (IDs
// are never reused).
func (s *State) NodeRemoved(id NodeID) bool { return s.isRemoved(id) }

func (s *State) isRemoved(id NodeID) bool {
	_, gone := s.removedNodes[id]
	return gone
}

// setManager records (or, with an empty address, forgets) the API address of
// manager replica id.
func (s *State) setManager(id uint64, addr string) Result {
	if s.cfg.Group != 0 {
		return reject(CodeInvalid, "managers are recorded by the cluster group only")
	}
	if id == 0 || len(addr) > 255 {
		return reject(CodeInvalid, "manager needs a replica ID of 1 or more and an address of at most 255 characters")
	}
	if addr == "" {
		delete(s.managers, id)
	} else {
		s.managers[id] = addr
	}
	return Result{ID: id}
}

// Managers returns a copy of the recorded manager API addresses by replica ID.
func (s *State) Managers() map[uint64]string { return maps.Clone(s.managers) }
