package workload

import (
	"context"
	"fmt"
	"strings"
	"time"

	"shoal/api/client"
)

// Against a cluster it did not start (--join), the loadgen shares the
// cluster with its owner: it must not mistake an earlier run's services
// for its own, and it takes its services and networks away when it ends
// (its simulated nodes vanish with it, so services left behind would wait
// on them until their orphan timeout).

// Leftovers lists the plan's services and networks that already exist in
// the cluster, named as the driver would name its own.
func (d *Driver) Leftovers(ctx context.Context) ([]string, error) {
	svcs, err := d.services(ctx)
	if err != nil {
		return nil, err
	}
	var nets client.List[client.Network]
	if err := d.call(ctx, func(ctx context.Context, c *client.Client) error {
		var err error
		nets, err = c.Networks(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	var out []string
	for _, s := range svcs.Items {
		if d.own[s.Spec.Name] {
			out = append(out, "service "+s.Spec.Name)
		}
	}
	for _, n := range nets.Items {
		if d.own[n.Spec.Name] {
			out = append(out, "network "+n.Spec.Name)
		}
	}
	return out, nil
}

// Names is the set of the plan's service and network names.
func (p Plan) Names() map[string]bool {
	out := map[string]bool{}
	for _, s := range p.Services {
		out[s.Name] = true
	}
	for _, n := range p.Networks {
		out[n.Name] = true
	}
	return out
}

// Cleanup removes the plan's services, waits until the cluster deleted
// them (their agents confirmed every task's shutdown), then removes the
// plan's networks as their addresses leave quarantine. It returns what it
// could not remove before ctx ended, with the reason.
func (d *Driver) Cleanup(ctx context.Context) error {
	d.wg.Wait() // no re-creation in flight
	var failed []string
	for _, s := range d.plan.Services {
		err := d.call(ctx, func(ctx context.Context, c *client.Client) error {
			_, _, err := c.RemoveService(ctx, s.Name)
			return err
		})
		if err != nil && !isCode(err, client.CodeNotFound) {
			failed = append(failed, fmt.Sprintf("service %s: %v", s.Name, err))
		}
	}
	for {
		left, err := d.Leftovers(ctx)
		if err != nil {
			return fmt.Errorf("workload: cleanup: %w", err)
		}
		services := 0
		for _, l := range left {
			if strings.HasPrefix(l, "service ") {
				services++
			}
		}
		if services == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("workload: cleanup: still being removed when time ran out: %s", strings.Join(left, ", "))
		case <-time.After(250 * time.Millisecond):
		}
	}
	// A network goes once its addresses are out of quarantine: the
	// agents' next syncs confirm the tasks are gone.
	nets := d.plan.Networks
	for len(nets) > 0 {
		var busy []Network
		var why []string
		for _, n := range nets {
			err := d.call(ctx, func(ctx context.Context, c *client.Client) error { return c.RemoveNetwork(ctx, n.Name) })
			if err != nil && !isCode(err, client.CodeNotFound) {
				busy, why = append(busy, n), append(why, fmt.Sprintf("network %s: %v", n.Name, err))
			}
		}
		if nets = busy; len(nets) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			failed = append(failed, why...)
			nets = nil
		case <-time.After(500 * time.Millisecond):
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("workload: cleanup: could not remove %s", strings.Join(failed, "; "))
	}
	return nil
}

// PauseNodes sets the nodes to availability pause: nothing new is placed
// on them (the owner's services included) while the run winds down.
func (d *Driver) PauseNodes(ctx context.Context, ids []uint32) error {
	pause := "pause"
	var first error
	for _, id := range ids {
		err := d.call(ctx, func(ctx context.Context, c *client.Client) error {
			_, err := c.UpdateNode(ctx, fmt.Sprint(id), client.NodeUpdate{Availability: &pause})
			return err
		})
		if err != nil && !isCode(err, client.CodeNotFound) && first == nil {
			first = fmt.Errorf("workload: pause node %d: %w", id, err)
		}
	}
	return first
}

// RemoveNodes waits until each node is down (its agent stopped and the
// cluster noticed), then removes it. A node that still holds another
// service's task cannot be removed until that task is orphaned; it is
// named in the error.
func (d *Driver) RemoveNodes(ctx context.Context, ids []uint32) (removed int, err error) {
	left := map[uint32]bool{}
	for _, id := range ids {
		left[id] = true
	}
	var why, kept []string
	for len(left) > 0 {
		l, err := d.nodes(ctx)
		if err != nil {
			return removed, err
		}
		present := map[uint32]bool{}
		why = why[:0]
		for _, n := range l.Items {
			if !left[n.ID] {
				continue
			}
			present[n.ID] = true
			if n.Status != "down" {
				why = append(why, fmt.Sprintf("node %d (%s) is %s", n.ID, n.Name, n.Status))
				continue
			}
			err := d.call(ctx, func(ctx context.Context, c *client.Client) error { return c.RemoveNode(ctx, fmt.Sprint(n.ID)) })
			switch {
			case err == nil || isCode(err, client.CodeNotFound):
				delete(left, n.ID)
				removed++
			default: // e.g. it holds another service's task: waiting will not help
				kept = append(kept, fmt.Sprintf("node %d (%s): %v", n.ID, n.Name, err))
				delete(left, n.ID)
			}
		}
		for id := range left {
			if !present[id] {
				delete(left, id) // removed meanwhile
			}
		}
		if len(left) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return removed, fmt.Errorf("workload: %d nodes not removed: %s", len(left)+len(kept), strings.Join(append(kept, why...), "; "))
		case <-time.After(time.Second):
		}
	}
	if len(kept) > 0 {
		return removed, fmt.Errorf("workload: %d nodes not removed: %s", len(kept), strings.Join(kept, "; "))
	}
	return removed, nil
}

// LiveNodes lists the nodes whose name match accepts and that are not
// down, as "node ID (NAME) is STATUS".
func (d *Driver) LiveNodes(ctx context.Context, match func(name string) bool) ([]string, error) {
	l, err := d.nodes(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range l.Items {
		if match(n.Name) && n.Status != "down" {
			out = append(out, fmt.Sprintf("node %d (%s) is %s", n.ID, n.Name, n.Status))
		}
	}
	return out, nil
}

// nodes lists every node (one page).
func (d *Driver) nodes(ctx context.Context) (client.List[client.Node], error) {
	var l client.List[client.Node]
	err := d.call(ctx, func(ctx context.Context, c *client.Client) error {
		var err error
		l, _, err = c.Nodes(ctx, &client.Query{Params: map[string][]string{"per_page": {"100000"}}})
		return err
	})
	if err != nil {
		return l, fmt.Errorf("workload: list nodes: %w", err)
	}
	return l, nil
}

// services lists every service (one page).
func (d *Driver) services(ctx context.Context) (client.List[client.Service], error) {
	var l client.List[client.Service]
	err := d.call(ctx, func(ctx context.Context, c *client.Client) error {
		var err error
		l, _, err = c.Services(ctx, &client.Query{Params: map[string][]string{"per_page": {"10000"}}})
		return err
	})
	return l, err
}
