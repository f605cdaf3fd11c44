package loadgen

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/loadgen/cluster"
)

// A run against a cluster it joined counts only its own services (the
// owner's service does not make it fail as-desired), removes its services
// and networks at the end (the owner's stay), and a run that finds
// services named like its own refuses to start, saying which.
func TestJoinRunOwnsAndCleansUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a manager and simulated agents")
	}
	bin := buildShoal(t)
	tmp := t.TempDir() // where the runs make their own data directories
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, err := cluster.Start(ctx, cluster.Config{Binary: bin, Managers: 1, DataDir: t.TempDir(), Groups: 2, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c, err := cl.Access.Client(cl.APIs()[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.CreateService(ctx, client.ServiceSpec{Name: "owners-web", Replicas: ptrU32(2), Command: []string{"sleep", "infinity"}}); err != nil {
		t.Fatal(err)
	}
	run := func() (*Config, error) {
		var out lockedBuffer
		cfg := Config{Binary: bin, Join: cl.APIs(), Insecure: true, Agents: 10, Tasks: 60, Services: 3, Seed: 2,
			Phases: []string{"ramp", "quiesce"}, RampTimeout: 30 * time.Second, QuiesceTimeout: 30 * time.Second, Out: &out}
		rep, err := Run(ctx, cfg)
		t.Logf("run: %v\n%s", err, out.String())
		if err == nil && (rep.Violations != 0 || !rep.Converged || rep.TasksRunning != 60) {
			t.Errorf("run against a cluster with the owner's service: %d violations %v, converged=%v, %d running (want 60)\n%s",
				rep.Violations, rep.ViolationList, rep.Converged, rep.TasksRunning, out.String())
		}
		if err == nil && (!strings.Contains(out.String(), "removed this run's 3 services and 3 networks") ||
			!strings.Contains(out.String(), "of the run's 10 nodes once they were down")) {
			t.Errorf("the run did not say it cleaned up:\n%s", out.String())
		}
		return &cfg, err
	}
	if _, err := run(); err != nil {
		t.Fatalf("first run: %v", err)
	}
	svcs, _, err := c.Services(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	nets, err := c.Networks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(svcs.Items) != 1 || svcs.Items[0].Spec.Name != "owners-web" || len(nets.Items) != 0 {
		t.Fatalf("after the run the cluster has %d services (want only owners-web) and %d networks (want 0)", len(svcs.Items), len(nets.Items))
	}
	// The run's nodes are gone, but for those the owner's tasks landed on
	// (down, kept until those tasks are orphaned).
	nodes, _, err := c.Nodes(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if n.Status != "down" || n.Tasks == 0 {
			t.Errorf("after the run node %d (%s) is %s with %d tasks; want removed, or down holding the owner's tasks", n.ID, n.Name, n.Status, n.Tasks)
		}
	}
	if _, err := run(); err != nil {
		t.Fatalf("second run against the same cluster: %v", err)
	}
	if _, _, err := c.CreateService(ctx, client.ServiceSpec{Name: "svc-001", Replicas: ptrU32(0), Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := run(); err == nil || !strings.Contains(err.Error(), "service svc-001") {
		t.Fatalf("a run finding a service named like its own: %v, want a refusal naming service svc-001", err)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "shoal-loadgen-*")); len(left) > 0 {
		t.Errorf("the runs left data directories behind: %v", left)
	}
}

func ptrU32(v uint32) *uint32 { return &v }
