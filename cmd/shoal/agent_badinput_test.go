package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An agent that cannot start says why in one line, in the terms of its
// flags, with no package name, and exits non-zero at once.
func TestAgentRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	held := filepath.Join(dir, "held")
	first := startProc(t, "agent-1", "agent", "--insecure", "--join", freeAddr(t), "--data-dir", held)
	waitFor(t, 30*time.Second, "the first agent started", func() (bool, string) {
		return strings.Contains(first.out.String(), "agent: starting"), first.out.String()
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--join", "127.0.0.1", "--data-dir", filepath.Join(dir, "a")}, `--join "127.0.0.1": give a manager's API address as host:port`},
		{[]string{"--join", "127.0.0.1:7700,:", "--data-dir", filepath.Join(dir, "a")}, `--join ":": give a manager's API address as host:port`},
		{[]string{"--join", "127.0.0.1:1", "--data-dir", file}, "--data-dir " + file + ": cannot make the directory"},
		{[]string{"--join", "127.0.0.1:1", "--data-dir", held}, "--data-dir " + held + ": in use by another agent (process "},
	} {
		out, err := runShoal(t, append([]string{"agent", "--insecure"}, c.args...)...)
		out = strings.TrimSpace(out)
		if err == nil || !strings.HasPrefix(out, "shoal: "+c.want) || strings.Contains(out, "\n") {
			t.Errorf("agent %v: %v\n got: %s\nwant one line beginning: shoal: %s", c.args, err, out, c.want)
		}
		if m := packagePrefix.FindString(strings.TrimPrefix(out, "shoal: ")); m != "" {
			t.Errorf("agent %v names a package (%q): %s", c.args, m, out)
		}
	}
}
