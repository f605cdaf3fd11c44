package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A loadgen run with a flag it cannot honour fails before it starts
// anything (no manager, no agent: the output says nothing was started),
// naming the flag and what it wants, instead of running with a default in
// its place or failing at the end of the run.
func TestLoadgenRefusesBadFlagsBeforeStarting(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-dir", "run.json")
	for _, c := range []struct{ args, want []string }{
		{[]string{"--agents", "0"}, []string{"--agents must be 1 or more (got 0)"}},
		{[]string{"--tasks", "-5"}, []string{"--tasks must be 1 or more (got -5)"}},
		{[]string{"--services", "0"}, []string{"--services must be 1 or more"}},
		{[]string{"--tasks", "10", "--services", "20"}, []string{"--services 20 is more than --tasks 10"}},
		{[]string{"--fault-share", "2"}, []string{"--fault-share must be above 0 and at most 1", "got 2"}},
		{[]string{"--fault-share", "0"}, []string{"--fault-share must be above 0"}},
		{[]string{"--threshold", "bogus"}, []string{`threshold "bogus"`, "NAME<VALUE"}},
		{[]string{"--threshold", "converge<abc"}, []string{`"abc" is neither a number nor a duration`}},
		{[]string{"--threshold", "speed<5s"}, []string{`no figure named "speed"`, "converge"}},
		{[]string{"--json", missing}, []string{"--json " + missing, "cannot write a file in", "nothing was started"}},
		{[]string{"--report", dir}, []string{"--report " + dir, "is a directory"}},
		{[]string{"--cpuprofile", missing}, []string{"--cpuprofile", "cannot write"}},
		// --json passes (a probe file is made in dir and removed), then --cpuprofile fails.
		{[]string{"--json", filepath.Join(dir, "ok.json"), "--cpuprofile", missing}, []string{"--cpuprofile " + missing}},
		{[]string{"--managers", "0"}, []string{"--managers must be 1 or more"}},
		{[]string{"--fleet-workers", "-1"}, []string{"--fleet-workers must be 0 or more"}},
		{[]string{"--fleet-local", "5"}, []string{"--fleet-local is for a run with --fleet-workers"}},
		{[]string{"--fleet-workers", "2", "--agents", "10", "--fleet-local", "10"}, []string{"leave some of the 10 agents"}},
		{[]string{"--fleet-workers", "2", "--fleet-token-file", missing}, []string{"--fleet-token-file " + missing, "cannot write"}},
	} {
		var out bytes.Buffer
		root := newRoot()
		root.SetArgs(append([]string{"loadgen"}, c.args...))
		root.SetOut(&out)
		root.SetErr(&bytes.Buffer{})
		err := root.Execute()
		if err == nil {
			t.Fatalf("%v: no error", c.args)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q does not say %q", c.args, err, w)
			}
		}
		if out.Len() > 0 {
			t.Errorf("%v: the run started: %q", c.args, out.String())
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".shoal-loadgen-*")); len(leftovers) > 0 {
		t.Errorf("the write checks left files behind: %v", leftovers)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("%s was made", missing)
	}
	if _, err := os.Stat(filepath.Join(dir, "ok.json")); err == nil {
		t.Error("the check made the --json file")
	}
}

// A good threshold and writable outputs pass the checks.
func TestLoadgenAcceptsGoodFlags(t *testing.T) {
	dir := t.TempDir()
	o := loadgenOptions{jsonFile: filepath.Join(dir, "run.json"), reportFile: filepath.Join(dir, "run.html")}
	o.cfg.Agents, o.cfg.Tasks, o.cfg.Services, o.cfg.Managers = 10, 100, 5, 3
	o.cfg.Thresholds = []string{"converge<20s", "running_p99 <= 5s", "heap_per_task<1024", "violations<1", "tasks_running>=100"}
	if err := checkLoadgenFlags(newLoadgenCmd(), o); err != nil {
		t.Fatal(err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, "*")); len(leftovers) > 0 {
		t.Errorf("the checks left files behind: %v", leftovers)
	}
	// An existing file is written over only by the run, not by the check;
	// /dev/null takes a report.
	old := filepath.Join(dir, "old.json")
	if err := os.WriteFile(old, []byte("last run"), 0o644); err != nil {
		t.Fatal(err)
	}
	o.jsonFile, o.reportFile = old, os.DevNull
	if err := checkLoadgenFlags(newLoadgenCmd(), o); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(old); string(b) != "last run" {
		t.Errorf("the check changed an existing file: %q", b)
	}
	// The default --services (more than these --tasks) is capped, not
	// refused; --managers is not looked at with --join.
	o.cfg.Tasks, o.cfg.Services = 10, 20
	o.join, o.cfg.Managers = "127.0.0.1:7700", 0
	if err := checkLoadgenFlags(newLoadgenCmd(), o); err != nil {
		t.Errorf("default --services above --tasks, --join without --managers: %v", err)
	}
}

// A fleet worker says what is missing or wrong before it connects.
func TestLoadgenFleetWorkerRefusesBadFlags(t *testing.T) {
	for _, c := range []struct{ args, want []string }{
		{[]string{"--token", "x"}, []string{"--coordinator is required"}},
		{[]string{"--coordinator", "127.0.0.1:1", "--token", "nope"}, []string{"--token", "not a loadgen fleet token"}},
	} {
		root := newRoot()
		root.SetArgs(append([]string{"loadgen", "fleet"}, c.args...))
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		err := root.Execute()
		if err == nil {
			t.Fatalf("%v: no error", c.args)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q does not say %q", c.args, err, w)
			}
		}
	}
}
