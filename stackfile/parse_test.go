package stackfile

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The example stack reads into the services and networks it declares,
// named and labelled for the stack.
func TestParseExample(t *testing.T) {
	data, err := os.ReadFile("../examples/shop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, err := Parse(data, "shop")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(st)
	want := `{"Name":"shop",` +
		`"Services":[` +
		`{"name":"shop_api","replicas":2,"command":["sleep","100000"],"env":["DB=shop_db"],"dir":"/tmp","networks":["shop_back"],` +
		`"constraints":["node.role==worker"],"reserve":{},"placement":{"max_replicas_per_node":2},"labels":{"shoal.stack":"shop"}},` +
		`{"name":"shop_logship","mode":"global","command":["sleep","100000"],"reserve":{},"labels":{"shoal.stack":"shop"}},` +
		`{"name":"shop_web","replicas":3,"command":["sleep","100000"],"env":["PORT=8080","UPSTREAM=shop_api"],` +
		`"stop_grace":"5s","networks":["shop_front","shop_back"],"reserve":{"cpu":100,"memory":33554432},` +
		`"restart":{"condition":"on-failure","delay":"1s","max_attempts":3,"window":"1m0s"},` +
		`"update":{"parallelism":1,"delay":"1s","failure_action":"rollback","monitor":"5s","order":"start-first"},` +
		`"rollback":{"parallelism":0,"failure_action":"continue"},` +
		`"placement":{"preferences":["node.labels.zone"]},"labels":{"shoal.stack":"shop","tier":"front"}}],` +
		`"Networks":[{"name":"shop_back","subnet":"10.10.2.0/24"},{"name":"shop_front","subnet":"10.10.1.0/24"}]}`
	if string(got) != want {
		t.Fatalf("parsed\n%s\nwant\n%s", got, want)
	}
}

// Every key outside the subset, and every value of the wrong kind, is
// refused with its line and path.
func TestParseRefusesWithLineNumbers(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"services:\n  web:\n    command: [sleep, \"1\"]\n    ports: [\"80:80\"]\n",
			`line 4: services.web.ports: not supported (a service takes: image, command, environment, working_dir, networks, stop_grace_period, deploy)`},
		{"services:\n  web:\n    command: sleep 1000\n",
			`line 3: services.web.command: give the command as a list`},
		{"services:\n  web:\n    command: [sleep]\n    deploy:\n      resources:\n        limits:\n          memory: 1G\n",
			`line 6: services.web.deploy.resources.limits: not supported (resources takes: reservations)`},
		{"services:\n  web:\n    command: [sleep]\n    deploy:\n      replicas: three\n",
			`line 5: services.web.deploy.replicas: "three" is not a whole number`},
		{"services:\n  web:\n    command: [sleep]\n    deploy:\n      update_config:\n        failure_action: explode\n",
			`line 6: services.web.deploy.update_config.failure_action: "explode" is not one of pause, continue, rollback`},
		{"services:\n  web:\n    command: [sleep]\n    deploy:\n      rollback_config:\n        failure_action: rollback\n",
			`line 6: services.web.deploy.rollback_config.failure_action: "rollback" is not one of pause, continue`},
		{"services:\n  web:\n    command: [sleep]\n    deploy:\n      update_config:\n        delay: soon\n",
			`line 6: services.web.deploy.update_config.delay: "soon" is not a duration`},
		{"services:\n  web:\n    command: [sleep]\n    deploy:\n      resources:\n        reservations:\n          memory: lots\n",
			`line 7: services.web.deploy.resources.reservations.memory: "lots" is not a size`},
		{"services:\n  web:\n    command: [sleep]\n    networks: [front]\n",
			`line 4: services.web.networks: network "front" is not declared under the file's networks:`},
		{"services:\n  web:\n    command: [sleep]\nnetworks:\n  front:\n    driver: overlay\n",
			`line 6: networks.front.driver: not supported (a network takes: ipam)`},
		{"services:\n  web:\n    command: [sleep]\nnetworks:\n  front: {}\n",
			`line 5: networks.front: give the network a subnet under ipam.config`},
		{"services:\n  web:\n    command: [sleep]\n    environment:\n      KEY:\n",
			`line 5: services.web.environment: KEY: give a value`},
		{"services:\n  web:\n    command: [sleep]\n    deploy:\n      placement:\n        preferences:\n          - spread: zone\n",
			`line 7: services.web.deploy.placement.preferences[0].spread: "zone": spread over a node label`},
		{"services:\n  web:\n    command: [sleep]\n  web:\n    command: [true]\n",
			`line 4: services.web: given twice (first at line 2)`},
		{"services:\n  web:\n    command: [sleep]\nvolumes:\n  data: {}\n",
			`line 4: volumes: not supported (the file takes: version, services, networks)`},
		{"services:\n  web:\n    command: [sleep]\n    deploy:\n      mode: global\n      replicas: 2\n",
			`services.web.deploy.replicas: a global service runs one task per node`},
		{"services:\n  web:\n    image: x\n    deploy:\n      update_config:\n        max_failure_ratio: 2\n",
			`line 6: services.web.deploy.update_config.max_failure_ratio: "2" is not a fraction from 0 to 1`},
		{"services:\n  web:\n    command: [sleep]\n    deploy:\n      placement:\n        constraints: [\"zone=a\"]\n",
			`line 6: services.web.deploy.placement.constraints[0]: invalid constraint "zone=a": use == or != to compare, not a single =`},
		{"services:\n  web:\n    command: [sleep]\nnetworks:\n  n:\n    ipam:\n      config:\n        - subnet: 10.0.0.0/33\n",
			`line 8: networks.n.ipam.config[0].subnet: "10.0.0.0/33" is not a subnet in CIDR form`},
		{"services: [web]\n", `line 1: services: give a map of names, not a list`},
		{"", `the file is empty`},
		{"services:\n  web:\n    command: [sleep\n", `not YAML`},
	} {
		_, err := Parse([]byte(c.file), "shop")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("file\n%s\nerror %v, want one with %q", c.file, err, c.want)
		}
	}
}

// A string command is refused, never split; an alias (*name) reads as the
// anchored value.
func TestParseAliasesAndStackLabel(t *testing.T) {
	file := "x: &cmd [\"sleep\", \"9\"]\nservices:\n  a:\n    command: *cmd\n"
	if _, err := Parse([]byte(file), "s"); err == nil || !strings.Contains(err.Error(), "line 1: x: not supported") {
		t.Fatalf("a top-level extension key: %v", err)
	}
	file = "services:\n  a:\n    command: &cmd [\"sleep\", \"9\"]\n  b:\n    command: *cmd\n    deploy:\n      labels: [team=x]\n"
	st, err := Parse([]byte(file), "s")
	if err != nil {
		t.Fatal(err)
	}
	if b := st.Services[1]; strings.Join(b.Command, " ") != "sleep 9" || b.Labels["team"] != "x" || b.Labels[StackLabel] != "s" {
		t.Fatalf("service b: %+v", b)
	}
	file = "services:\n  a:\n    command: [x]\n    deploy:\n      labels:\n        shoal.stack: other\n"
	if _, err := Parse([]byte(file), "s"); err == nil || !strings.Contains(err.Error(), "shoal.stack is set by shoal") {
		t.Fatalf("a stack label in the file: %v", err)
	}
	if _, err := Parse([]byte("services:\n  a:\n    command: [x]\n"), "bad name"); err == nil {
		t.Fatal("a stack name with a space was taken")
	}
}
