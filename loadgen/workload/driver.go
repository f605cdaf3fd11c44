package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"shoal/api/client"
)

// Counts are the operations the driver carried out.
type Counts struct {
	Networks, Services, Scales, Updates, Removes, Recreates, Errors atomic.Int64
	// Interrupted counts calls the end of their phase cut short: the
	// loadgen's doing, not the cluster's, so not among Errors.
	Interrupted atomic.Int64
}

// Driver carries out a plan through the user API.
type Driver struct {
	plan    Plan
	own     map[string]bool // the plan's service and network names; never changes
	bg      context.Context // re-creations outlive the phase that removed the service
	clients []*client.Client
	Counts  Counts
	rng     *rand.Rand // churn choices; used by one goroutine at a time
	cur     atomic.Int64
	wg      sync.WaitGroup // removals waiting to re-create
	errs    struct {
		sync.Mutex
		first []string // the first keptErrors failures, described
	}
	mu struct {
		sync.Mutex
		replicas map[string]int  // current desired replicas
		busy     map[string]bool // removed, waiting to be re-created
		gen      map[string]int  // rolling-update generation
		specs    map[string]client.ServiceSpec
	}
}

// NewDriver returns a driver of plan against managers, reached with dial;
// background work (re-creating removed services) runs until bg ends.
func NewDriver(bg context.Context, plan Plan, managers []string, dial func(addr string) (*client.Client, error), seed uint64) (*Driver, error) {
	d := &Driver{plan: plan, bg: bg, rng: rand.New(rand.NewPCG(seed, 0xc4a7))}
	for _, m := range managers {
		c, err := dial(m)
		if err != nil {
			return nil, err
		}
		d.clients = append(d.clients, c)
	}
	d.mu.replicas = map[string]int{}
	d.mu.busy = map[string]bool{}
	d.mu.gen = map[string]int{}
	d.mu.specs = map[string]client.ServiceSpec{}
	d.own = plan.Names()
	for _, s := range plan.Services {
		d.mu.specs[s.Name] = d.spec(s, 0, "stop-first")
	}
	return d, nil
}

func ptr[T any](v T) *T { return &v }

// spec is service s's spec at generation gen, with the plan's constraints.
func (d *Driver) spec(s Service, gen int, order string) client.ServiceSpec {
	sp := client.ServiceSpec{Name: s.Name, Replicas: ptr(uint32(s.Replicas)), Command: []string{"sleep", "infinity"},
		Constraints: slices.Clone(d.plan.Constraints),
		Networks:    []string{s.Network}, Env: []string{fmt.Sprintf("LOADGEN_GEN=%d", gen)},
		StopGrace: ptr(client.Duration(time.Second)),
		Restart:   &client.RestartPolicy{Condition: "any", Delay: ptr(client.Duration(200 * time.Millisecond))},
		Update: &client.UpdateConfig{Parallelism: ptr(uint32(max(1, s.Replicas/4))), Monitor: ptr(client.Duration(500 * time.Millisecond)),
			FailureAction: "continue", Order: order}}
	if s.LostAfter {
		sp.Disconnect = &client.Disconnect{LostAfter: client.Duration(5 * time.Second)}
	}
	return sp
}

// Ramp creates the networks, then the services, with `parallel` calls at
// once.
func (d *Driver) Ramp(ctx context.Context, parallel int) error {
	// Networks in parallel too: a network create returns once every
	// service group has it, and concurrent creates share those deliveries
	// (one at a time, 100 networks behind a thousand joining nodes took
	// half a minute).
	var g errgroup.Group
	g.SetLimit(max(parallel, 1))
	for _, n := range d.plan.Networks {
		g.Go(func() error {
			err := d.call(ctx, func(ctx context.Context, c *client.Client) error {
				_, err := c.CreateNetwork(ctx, client.NetworkSpec{Name: n.Name, Subnet: n.Subnet})
				return err
			})
			if err != nil && !isCode(err, client.CodeConflict) {
				return fmt.Errorf("workload: create network %s: %w", n.Name, err)
			}
			d.Counts.Networks.Add(1)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	var sg errgroup.Group
	sg.SetLimit(max(parallel, 1))
	for _, s := range d.plan.Services {
		sg.Go(func() error { return d.create(ctx, s.Name) })
	}
	return sg.Wait()
}

func (d *Driver) create(ctx context.Context, name string) error {
	d.mu.Lock()
	sp := d.mu.specs[name]
	d.mu.Unlock()
	err := d.call(ctx, func(ctx context.Context, c *client.Client) error {
		_, _, err := c.CreateService(ctx, sp)
		return err
	})
	if err != nil && !isCode(err, client.CodeConflict) {
		d.failed(ctx, "create "+name, err)
		return fmt.Errorf("workload: create service %s: %w", name, err)
	}
	d.mu.Lock()
	d.mu.replicas[name] = int(*sp.Replicas)
	d.mu.Unlock()
	d.Counts.Services.Add(1)
	return nil
}

// Churn carries out one seeded operation: a scale up or down, a rolling
// update, or a removal followed (once the service is gone) by its
// re-creation. It returns what it did.
func (d *Driver) Churn(ctx context.Context) string {
	s := d.plan.Services[d.rng.IntN(len(d.plan.Services))]
	op := d.rng.IntN(100)
	d.mu.Lock()
	if d.mu.busy[s.Name] {
		d.mu.Unlock()
		return "skip"
	}
	d.mu.Unlock()
	switch {
	case op < 45:
		n := max(1, int(float64(s.Replicas)*(0.5+0.8*d.rng.Float64())))
		if d.scale(ctx, s.Name, n) == nil {
			return "scale"
		}
	case op < 85:
		order := "stop-first"
		if d.rng.IntN(2) == 0 {
			order = "start-first"
		}
		d.mu.Lock()
		d.mu.gen[s.Name]++
		sp := d.spec(s, d.mu.gen[s.Name], order)
		sp.Replicas = ptr(uint32(d.mu.replicas[s.Name]))
		d.mu.specs[s.Name] = sp
		d.mu.Unlock()
		err := d.call(ctx, func(ctx context.Context, c *client.Client) error {
			_, _, err := c.UpdateService(ctx, sp, 0)
			return err
		})
		if err == nil {
			d.Counts.Updates.Add(1)
			return "update"
		}
		d.failed(ctx, "update "+s.Name, err)
	default:
		d.mu.Lock()
		d.mu.busy[s.Name] = true
		d.mu.Unlock()
		err := d.call(ctx, func(ctx context.Context, c *client.Client) error {
			_, _, err := c.RemoveService(ctx, s.Name)
			return err
		})
		if err != nil {
			d.failed(ctx, "remove "+s.Name, err)
			d.mu.Lock()
			delete(d.mu.busy, s.Name)
			d.mu.Unlock()
			return "error"
		}
		d.Counts.Removes.Add(1)
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.recreate(d.bg, s)
		}()
		return "remove"
	}
	return "error"
}

func (d *Driver) scale(ctx context.Context, name string, n int) error {
	err := d.call(ctx, func(ctx context.Context, c *client.Client) error {
		_, _, err := c.Scale(ctx, name, uint32(n))
		return err
	})
	if err != nil {
		d.failed(ctx, fmt.Sprintf("scale %s to %d", name, n), err)
		return err
	}
	d.mu.Lock()
	d.mu.replicas[name] = n
	sp := d.mu.specs[name]
	sp.Replicas = ptr(uint32(n))
	d.mu.specs[name] = sp
	d.mu.Unlock()
	d.Counts.Scales.Add(1)
	return nil
}

// recreate waits until a removed service is deleted, then creates it with
// its base replicas.
func (d *Driver) recreate(ctx context.Context, s Service) {
	for ctx.Err() == nil {
		err := d.call(ctx, func(ctx context.Context, c *client.Client) error {
			_, _, err := c.Service(ctx, s.Name, nil)
			return err
		})
		if isCode(err, client.CodeNotFound) {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
	d.mu.Lock()
	d.mu.gen[s.Name]++
	d.mu.specs[s.Name] = d.spec(s, d.mu.gen[s.Name], "stop-first")
	d.mu.Unlock()
	if d.create(ctx, s.Name) == nil {
		d.Counts.Recreates.Add(1)
	}
	d.mu.Lock()
	delete(d.mu.busy, s.Name)
	d.mu.Unlock()
}

// Restore waits for pending re-creations, then brings every service back
// to its planned replicas. It is safe to repeat: an answer lost in a
// leader kill leaves the driver unsure whether a scale, a removal or a
// creation was applied, so each service is read and set again (a scale to
// the current count changes nothing; a service that is gone is created; a
// service still being removed is left for the next call). It returns the
// first error after trying every service.
func (d *Driver) Restore(ctx context.Context) error {
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	// Eight at a time: one by one, a hundred services took most of a
	// minute on a loaded cluster. Every service is tried; the first error
	// is returned.
	var g errgroup.Group
	g.SetLimit(8)
	for _, s := range d.plan.Services {
		g.Go(func() error {
			if err := d.restoreOne(ctx, s); err != nil {
				return fmt.Errorf("workload: restore %s to %d replicas: %w", s.Name, s.Replicas, err)
			}
			return nil
		})
	}
	return g.Wait()
}

func (d *Driver) restoreOne(ctx context.Context, s Service) error {
	var cur client.Service
	err := d.call(ctx, func(ctx context.Context, c *client.Client) error {
		var err error
		cur, _, err = c.Service(ctx, s.Name, nil)
		return err
	})
	switch {
	case isCode(err, client.CodeNotFound):
		d.mu.Lock()
		d.mu.gen[s.Name]++
		d.mu.specs[s.Name] = d.spec(s, d.mu.gen[s.Name], "stop-first")
		d.mu.Unlock()
		return d.create(ctx, s.Name)
	case err != nil:
		return err
	case cur.Removing:
		return nil
	case cur.Spec.Replicas != nil && int(*cur.Spec.Replicas) == s.Replicas:
		d.mu.Lock()
		d.mu.replicas[s.Name] = s.Replicas
		sp := d.mu.specs[s.Name]
		sp.Replicas = ptr(uint32(s.Replicas))
		d.mu.specs[s.Name] = sp
		d.mu.Unlock()
		return nil // already as planned
	}
	return d.scale(ctx, s.Name, s.Replicas)
}

// Desired returns the plan's services with their base replicas (what
// every service must run at quiescence).
func (d *Driver) Desired() map[string]int {
	out := map[string]int{}
	for _, s := range d.plan.Services {
		out[s.Name] = s.Replicas
	}
	return out
}

// Converged reads every service and reports the running and desired
// totals of the plan's services (a service's running counted up to its
// desired replicas), and whether every planned service runs exactly its
// planned replicas. Services not in the plan (the owner's, in
// a cluster the loadgen joined) are not counted.
func (d *Driver) Converged(ctx context.Context) (running, desired int, ok bool, err error) {
	want := d.Desired()
	seen := 0
	ok = true
	token := ""
	for {
		var l client.List[client.Service]
		err = d.call(ctx, func(ctx context.Context, c *client.Client) error {
			q := &client.Query{Params: map[string][]string{"per_page": {"10000"}}}
			if token != "" {
				q.Params["next_token"] = []string{token}
			}
			var err error
			l, _, err = c.Services(ctx, q)
			return err
		})
		if err != nil {
			return 0, 0, false, err
		}
		pr, pd, pok, pn := tally(l.Items, want)
		running, desired, ok, seen = running+pr, desired+pd, ok && pok, seen+pn
		if l.NextToken == "" {
			break
		}
		token = l.NextToken
	}
	return running, desired, ok && seen == len(want), nil
}

// tally counts one page of services against want (the plan's services and
// their replicas): running and desired replicas, whether each runs exactly
// as planned, and how many are the plan's. A service's running counts up
// to its desired replicas: its count also holds the originals set aside on
// a disconnected node (running as last known) beside their replacements,
// and past its desired replicas one service would stand in for another's
// tasks not running yet.
func tally(items []client.Service, want map[string]int) (running, desired int, ok bool, seen int) {
	ok = true
	for _, s := range items {
		w, planned := want[s.Spec.Name]
		if !planned {
			continue // not the loadgen's (a cluster it joined)
		}
		running += min(s.Running, s.Desired)
		desired += s.Desired
		if s.Removing || s.Running != w || s.Desired != w {
			ok = false
		}
		seen++
	}
	return running, desired, ok, seen
}

// Lagging describes, for a run that did not converge, the services off the
// plan (at most max of them) and their tasks that are not running: state,
// desired state, node and message, as the managers have them, and, from
// probe when it is set, what the agent of the task's node keeps of it.
func (d *Driver) Lagging(ctx context.Context, max int, probe func(node uint32, task uint64) string) []string {
	want := d.Desired()
	var out []string
	l, err := d.services(ctx)
	if err != nil {
		return []string{"the services could not be read: " + err.Error()}
	}
	for _, s := range l.Items {
		w, planned := want[s.Spec.Name]
		if !planned || !s.Removing && s.Running == w && s.Desired == w {
			continue // on plan, or not the loadgen's
		}
		if len(out) >= max*8 {
			break
		}
		out = append(out, fmt.Sprintf("service %s: %d running, %d desired, plan %d, removing=%v", s.Spec.Name, s.Running, s.Desired, w, s.Removing))
		var tl client.List[client.Task]
		_ = d.call(ctx, func(ctx context.Context, c *client.Client) error {
			var err error
			tl, _, err = c.Tasks(ctx, &client.Query{Params: map[string][]string{"service": {s.Spec.Name}, "per_page": {"10000"}}})
			return err
		})
		n := 0
		for _, t := range tl.Items {
			if t.State == "running" || t.Desired != "running" && t.Desired != "ready" {
				continue
			}
			if n++; n > 6 {
				break
			}
			out = append(out, fmt.Sprintf("  task %s %s.%d %s desired=%s node=%d %s", t.ID, t.Service, t.Slot, t.State, t.Desired, t.Node, t.Message))
			if id, err := strconv.ParseUint(t.ID, 10, 64); probe != nil && t.Node != 0 && err == nil {
				out = append(out, fmt.Sprintf("    the agent of node %d: %s", t.Node, probe(uint32(t.Node), id)))
			}
		}
	}
	return out
}

// Task reads one task from the managers (nil, nil when it does not exist),
// moving to the next manager while one cannot answer.
func (d *Driver) Task(ctx context.Context, id string) (*client.Task, error) {
	var t client.Task
	err := d.call(ctx, func(ctx context.Context, c *client.Client) error {
		var err error
		t, err = c.Task(ctx, id)
		return err
	})
	switch {
	case err == nil:
		return &t, nil
	case isCode(err, client.CodeNotFound):
		return nil, nil
	}
	return nil, err
}

// each runs f(ctx, i) for i in [0, n), parallel at a time, each call
// within timeout.
func each(ctx context.Context, n, parallel int, timeout time.Duration, f func(ctx context.Context, i int)) {
	var g errgroup.Group
	g.SetLimit(max(parallel, 1))
	for i := range n {
		g.Go(func() error {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			f(cctx, i)
			return nil
		})
	}
	_ = g.Wait()
}

// FirstTasks returns the lowest task ID of each of the named services
// it could read, parallel reads at a time, each within timeout; a service
// without tasks, or whose read failed, is left out.
func (d *Driver) FirstTasks(ctx context.Context, names []string, parallel int, timeout time.Duration) map[string]uint64 {
	var mu sync.Mutex
	out := map[string]uint64{}
	each(ctx, len(names), parallel, timeout, func(ctx context.Context, i int) {
		var l client.List[client.Task]
		err := d.call(ctx, func(ctx context.Context, c *client.Client) error {
			var err error
			l, _, err = c.Tasks(ctx, &client.Query{Params: url.Values{"service": {names[i]}, "per_page": {"1"}}})
			return err
		})
		if err != nil || len(l.Items) == 0 {
			return
		}
		if id, err := strconv.ParseUint(l.Items[0].ID, 10, 64); err == nil {
			mu.Lock()
			out[names[i]] = id
			mu.Unlock()
		}
	})
	return out
}

// ReadTasks reads the tasks of ids, parallel reads at a time, each within
// timeout, and returns them in the order of ids: nil where the task is
// gone or could not be read.
func (d *Driver) ReadTasks(ctx context.Context, ids []uint64, parallel int, timeout time.Duration) []*client.Task {
	out := make([]*client.Task, len(ids))
	each(ctx, len(ids), parallel, timeout, func(ctx context.Context, i int) {
		out[i], _ = d.Task(ctx, strconv.FormatUint(ids[i], 10))
	})
	return out
}
