package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// Every spec flag of `service create` and `service update` round-trips
// through `service inspect`, against a real manager (which fills the
// defaults and validates); bad values are refused with a message naming
// the flag. One group of flags per subtest.
func TestServiceFlagsRoundTripThroughInspect(t *testing.T) {
	api, _, _ := oneManager(t, 0)
	// field returns the JSON of one top-level field of a service's spec
	// as inspect prints it.
	field := func(t *testing.T, name, key string) string {
		t.Helper()
		var svc struct {
			Spec map[string]json.RawMessage `json:"spec"`
		}
		out := cli(t, api, "service", "inspect", name)
		if err := json.Unmarshal([]byte(out), &svc); err != nil {
			t.Fatalf("inspect: %v\n%s", err, out)
		}
		return string(svc.Spec[key])
	}
	same := func(t *testing.T, what, got, want string) {
		t.Helper()
		var g, w any
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			t.Fatalf("bad want %s: %v", want, err)
		}
		if err := json.Unmarshal([]byte(got), &g); err != nil || !reflect.DeepEqual(g, w) {
			t.Errorf("%s: inspect shows %s, want %s", what, got, want)
		}
	}
	groups := []struct {
		name           string
		key            string // the spec field the group sets
		create         []string
		afterCreate    string
		update         []string
		afterUpdate    string
		otherKey, rest string // another field the group sets, after the update
	}{
		{name: "update", key: "update",
			create: []string{"--update-parallelism", "2", "--update-delay", "3s", "--update-monitor", "7s",
				"--update-max-failure-ratio", "0.25", "--update-failure-action", "rollback", "--update-order", "start-first"},
			afterCreate: `{"parallelism":2,"delay":"3s","monitor":"7s","max_failure_ratio":0.25,"failure_action":"rollback","order":"start-first"}`,
			update:      []string{"--update-monitor", "9s", "--update-max-failure-ratio", "0.5"},
			afterUpdate: `{"parallelism":2,"delay":"3s","monitor":"9s","max_failure_ratio":0.5,"failure_action":"rollback","order":"start-first"}`},
		{name: "rollback", key: "rollback",
			create: []string{"--rollback-parallelism", "0", "--rollback-delay", "2s", "--rollback-monitor", "11s",
				"--rollback-max-failure-ratio", "0.1", "--rollback-failure-action", "continue", "--rollback-order", "start-first"},
			afterCreate: `{"parallelism":0,"delay":"2s","monitor":"11s","max_failure_ratio":0.1,"failure_action":"continue","order":"start-first"}`,
			update:      []string{"--rollback-parallelism", "3", "--rollback-failure-action", "pause"},
			afterUpdate: `{"parallelism":3,"delay":"2s","monitor":"11s","max_failure_ratio":0.1,"failure_action":"pause","order":"start-first"}`},
		{name: "rollback-defaults", key: "rollback",
			afterCreate: `{"parallelism":1,"monitor":"5s","failure_action":"pause","order":"stop-first"}`,
			update:      []string{"--update-parallelism", "4"},
			afterUpdate: `{"parallelism":1,"monitor":"5s","failure_action":"pause","order":"stop-first"}`},
		{name: "placement", key: "placement",
			create: []string{"--placement-pref", "spread=node.labels.zone", "--placement-pref", "spread=node.labels.rack",
				"--replicas-max-per-node", "2", "--placement-strategy", "binpack"},
			afterCreate: `{"preferences":["node.labels.zone","node.labels.rack"],"max_replicas_per_node":2,"strategy":"binpack"}`,
			update: []string{"--placement-pref-rm", "spread=node.labels.zone", "--placement-pref-add", "spread=node.labels.row",
				"--replicas-max-per-node", "3"},
			afterUpdate: `{"preferences":["node.labels.rack","node.labels.row"],"max_replicas_per_node":3,"strategy":"binpack"}`},
		{name: "labels", key: "labels",
			create:      []string{"--label", "team=shop", "--label", "tier=front", "-l", "bare"},
			afterCreate: `{"team":"shop","tier":"front","bare":""}`,
			update:      []string{"--label-rm", "tier", "--label-add", "env=prod", "--label", "team=web"},
			afterUpdate: `{"team":"web","env":"prod","bare":""}`},
		{name: "env-constraints", key: "env",
			create:      []string{"--env", "A=1", "-e", "B=2", "--constraint", "node.labels.zone==a", "--constraint", "node.role==worker"},
			afterCreate: `["A=1","B=2"]`,
			update: []string{"--env-rm", "A", "--env-add", "B=3", "--env-add", "C=4",
				"--constraint-rm", "node.role==worker", "--constraint-add", "node.labels.disk==ssd"},
			afterUpdate: `["B=3","C=4"]`,
			otherKey:    "constraints", rest: `["node.labels.zone==a","node.labels.disk==ssd"]`},
		{name: "disconnect", key: "disconnect",
			create:      []string{"--disconnect-lost-after", "1m", "--disconnect-no-replace", "--disconnect-reconcile", "keep_original"},
			afterCreate: `{"lost_after":"1m0s","no_replace":true,"reconcile":"keep_original"}`,
			update:      []string{"--disconnect-reconcile", "longest_running", "--disconnect-no-replace=false"},
			afterUpdate: `{"lost_after":"1m0s","reconcile":"longest_running"}`},
		{name: "resources", key: "reserve",
			create:      []string{"--reserve-memory", "512M", "--reserve-cpu", "0.5"},
			afterCreate: `{"cpu":500,"memory":536870912}`,
			update:      []string{"--reserve-memory", "1.5g"},
			afterUpdate: `{"cpu":500,"memory":1610612736}`},
		{name: "restart-process", key: "restart",
			create: []string{"--restart-condition", "on-failure", "--restart-delay", "2s", "--restart-max-attempts", "3",
				"--restart-window", "1m", "--workdir", "/tmp", "--stop-grace-period", "3s"},
			afterCreate: `{"condition":"on-failure","delay":"2s","max_attempts":3,"window":"1m0s"}`,
			update:      []string{"--restart-window", "2m", "--stop-grace-period", "4s"},
			afterUpdate: `{"condition":"on-failure","delay":"2s","max_attempts":3,"window":"2m0s"}`,
			otherKey:    "stop_grace", rest: `"4s"`},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			name := "svc-" + g.name
			cli(t, api, append(append([]string{"service", "create", name, "--detach"}, g.create...), "--", "sleep", "1000")...)
			same(t, g.key+" after create", field(t, name, g.key), g.afterCreate)
			cli(t, api, append([]string{"service", "update", name, "--detach"}, g.update...)...)
			same(t, g.key+" after update", field(t, name, g.key), g.afterUpdate)
			if g.otherKey != "" {
				same(t, g.otherKey+" after update", field(t, name, g.otherKey), g.rest)
			}
		})
	}
	t.Run("bad-input", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--reserve-memory", "12X"}, `--reserve-memory "12X": give bytes or a size such as 512M or 1.5G`},
			{[]string{"--reserve-memory", "-1M"}, `--reserve-memory "-1M"`},
			{[]string{"--placement-pref", "pack=node.labels.zone"}, `--placement-pref "pack=node.labels.zone": only spread preferences exist`},
			{[]string{"--placement-pref", "spread=zone"}, `use spread=node.labels.KEY`},
			{[]string{"--update-max-failure-ratio", "1.5"}, `--update-max-failure-ratio 1.5: give a fraction from 0 to 1`},
			{[]string{"--rollback-monitor", "-1s"}, `--rollback-monitor -1s: give a duration of 0 or more`},
			{[]string{"--rollback-failure-action", "rollback"}, `--rollback-failure-action "rollback": use pause or continue`},
			{[]string{"--update-order", "sideways"}, `--update-order "sideways": use stop-first or start-first`},
			{[]string{"--disconnect-reconcile", "coin"}, `--disconnect-reconcile "coin": use best_score, keep_original, keep_replacement or longest_running`},
			{[]string{"--update-failure-action", "retry"}, `--update-failure-action "retry": use pause, continue or rollback`},
			{[]string{"--restart-condition", "always"}, `--restart-condition "always": use any, on-failure or none`},
			{[]string{"--placement-strategy", "pack"}, `--placement-strategy "pack": use spread or binpack`},
			{[]string{"--label", "=x"}, `--label "=x": give KEY=VALUE`},
			{[]string{"--env", "NOVALUE"}, `--env "NOVALUE": give KEY=VALUE`},
		} {
			out, err := cliErr(t, api, append(append([]string{"service", "create", "bad", "--detach"}, c.args...), "--", "true")...)
			if err == nil || !strings.Contains(out, c.want) {
				t.Errorf("create %v: %v %q, want an error with %q", c.args, err, out, c.want)
			}
			if strings.Contains(out, "statemachine") || strings.Contains(out, "sched:") {
				t.Errorf("create %v names a package: %q", c.args, out)
			}
		}
		cli(t, api, "service", "create", "good", "--detach", "--", "true")
		if out, err := cliErr(t, api, "service", "update", "good", "--env-add", "X"); err == nil || !strings.Contains(out, `--env-add "X": give KEY=VALUE`) {
			t.Errorf("update --env-add X: %v %q", err, out)
		}
	})
}
