package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"shoal/api/client"
)

// A call that fails while its phase runs is an API error, described (the
// first keptErrors of them); one its phase's end cut short is counted
// apart, not as the cluster's error, unless the cluster had refused it
// for `outage` by then.
func TestFailedCallsAreDescribedAndCutShortOnesKeptApart(t *testing.T) {
	d := &Driver{}
	live := context.Background()
	refused := &client.APIError{Status: 409, ErrorBody: client.ErrorBody{Code: client.CodeConflict, Error: `service "svc-003" is being removed`}}
	d.failed(live, "scale svc-003 to 7", refused)
	ended, cancel := context.WithCancel(live)
	cancel()
	d.failed(ended, "update svc-004", context.Canceled)
	if n := d.Counts.Errors.Load(); n != 1 {
		t.Fatalf("%d API errors, want 1 (the cut-short call is not one)", n)
	}
	if n := d.Counts.Interrupted.Load(); n != 1 {
		t.Fatalf("%d calls cut short, want 1", n)
	}
	got := d.Errors()
	if len(got) != 1 || !strings.HasPrefix(got[0], "scale svc-003 to 7: ") || !strings.Contains(got[0], "being removed") {
		t.Fatalf("described errors %q, want the scale and why it failed", got)
	}
	for i := range 2 * keptErrors {
		d.failed(live, fmt.Sprintf("remove svc-%03d", i), errors.New("boom"))
	}
	if n, kept := d.Counts.Errors.Load(), len(d.Errors()); n != 1+2*keptErrors || kept != keptErrors {
		t.Fatalf("%d errors counted, %d described; want %d and %d", n, kept, 1+2*keptErrors, keptErrors)
	}
	if first := d.Errors()[0]; !strings.HasPrefix(first, "scale svc-003") {
		t.Fatalf("the first described error is %q, want the first to fail", first)
	}

	// A call still retrying "unavailable" when its phase ended: a moment
	// of it (a leader kill) is cut short; `outage` of it is an error.
	d = &Driver{}
	unavailable := &client.APIError{Status: 503, ErrorBody: client.ErrorBody{Code: client.CodeUnavailable, Error: "no leader"}}
	d.failed(ended, "update svc-001", &cutShort{last: unavailable, since: time.Now().Add(-time.Second)})
	d.failed(ended, "update svc-002", &cutShort{last: unavailable, since: time.Now().Add(-outage)})
	if e, i := d.Counts.Errors.Load(), d.Counts.Interrupted.Load(); e != 1 || i != 1 {
		t.Fatalf("%d errors and %d cut short, want one of each", e, i)
	}
	if got := d.Errors(); len(got) != 1 || !strings.HasPrefix(got[0], "update svc-002: no leader (refused for 10s") {
		t.Fatalf("described errors %q, want the update refused for 10s", got)
	}
}

// Every service the driver creates or updates carries the plan's
// constraints (with --join: only the run's simulated nodes), whatever its
// generation or update order; a plan without any places anywhere.
func TestServicesCarryThePlansConstraints(t *testing.T) {
	plan := NewPlan(1, 200, 4, 2)
	plan.Constraints = []string{"node.labels.shoal-loadgen==sim"}
	d, err := NewDriver(context.Background(), plan, nil, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range plan.Services {
		for _, sp := range []client.ServiceSpec{d.mu.specs[s.Name], d.spec(s, 3, "start-first")} {
			if len(sp.Constraints) != 1 || sp.Constraints[0] != plan.Constraints[0] {
				t.Fatalf("service %s: constraints %q, want %q", s.Name, sp.Constraints, plan.Constraints)
			}
		}
	}
	if sp := (&Driver{}).spec(plan.Services[0], 0, "stop-first"); len(sp.Constraints) != 0 {
		t.Fatalf("a plan without constraints gave %q", sp.Constraints)
	}
}

// A service's running tasks count up to its desired replicas: a count
// past them (originals set aside on a disconnected node beside their
// replacements) does not stand in for another service's tasks not running
// yet; services not in the plan are not counted.
func TestTallyCountsRunningUpToDesired(t *testing.T) {
	svc := func(name string, running, desired int) client.Service {
		var s client.Service
		s.Spec.Name, s.Running, s.Desired = name, running, desired
		return s
	}
	want := map[string]int{"a": 10, "b": 10}
	running, desired, ok, seen := tally([]client.Service{svc("a", 12, 10), svc("b", 8, 10), svc("owner", 5, 5)}, want)
	if running != 18 || desired != 20 || ok || seen != 2 {
		t.Fatalf("running %d, desired %d, ok %v, seen %d; want 18, 20, false, 2", running, desired, ok, seen)
	}
	if running, _, ok, _ := tally([]client.Service{svc("a", 10, 10), svc("b", 10, 10)}, want); running != 20 || !ok {
		t.Fatalf("running %d, ok %v; want 20, true", running, ok)
	}
}
