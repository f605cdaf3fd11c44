package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// packagePrefix is a Go package's name where a user reads a message
// ("sched: invalid constraint"): the text the code's sentinels carried.
var packagePrefix = regexp.MustCompile(`\b(api|client|sched|ipam|statemachine|engine|cluster|route|wire|agent|manager|security|tlsdir|taskref|control|duty|monitor|raftnet|dragonboat|fasthttp): `)

// documentedBadInputs reads docs/cli.md's "What bad input gets": each
// "$ shoal ARGS" line and the one line of output under it.
func documentedBadInputs(t *testing.T) (cases []struct {
	args []string
	want string
}) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## What bad input gets")
	if !ok {
		t.Fatal("docs/cli.md has no section \"What bad input gets\"")
	}
	lines := strings.Split(section, "\n")
	for i, l := range lines {
		cmd, ok := strings.CutPrefix(l, "    $ shoal ")
		if !ok {
			continue
		}
		if i+1 == len(lines) {
			t.Fatalf("docs/cli.md: %q has no output under it", l)
		}
		cases = append(cases, struct {
			args []string
			want string
		}{splitArgs(t, cmd), strings.TrimPrefix(lines[i+1], "    ")})
	}
	return cases
}

// splitArgs splits a documented command line at spaces outside single
// quotes.
func splitArgs(t *testing.T, s string) []string {
	var args []string
	var cur strings.Builder
	quoted, any := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, any = !quoted, true
		case r == ' ' && !quoted:
			if any {
				args = append(args, cur.String())
			}
			cur.Reset()
			any = false
		default:
			cur.WriteRune(r)
			any = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quote in %q", s)
	}
	if any {
		args = append(args, cur.String())
	}
	return args
}

// Every bad input docs/cli.md lists, run through the built CLI against a
// real manager: a non-zero exit, exactly the documented line, and no
// package name where the user reads it.
func TestDocumentedBadInputs(t *testing.T) {
	cases := documentedBadInputs(t)
	if len(cases) < 20 {
		t.Fatalf("docs/cli.md lists %d bad inputs", len(cases))
	}
	api, dir := freeAddr(t), t.TempDir()
	srv := startProc(t, "serve", "serve", "--insecure", "--data-dir", dir, "--api-addr", api, "--groups", "2", "--raft-log-level", "critical")
	waitFor(t, 30*time.Second, "manager ready", func() (bool, string) {
		return strings.Contains(srv.out.String(), "shoal: ready"), srv.out.String()
	})
	cli(t, api, "network", "create", "front", "--subnet", "10.1.0.0/24")
	for _, c := range cases {
		out, err := cliErr(t, api, c.args...)
		got := strings.TrimSpace(out)
		if err == nil || got != c.want {
			t.Errorf("shoal %s: exit %v\n got: %s\nwant: %s", strings.Join(c.args, " "), err, got, c.want)
		}
		if m := packagePrefix.FindString(strings.TrimPrefix(got, "shoal: ")); m != "" {
			t.Errorf("shoal %s names a package (%q): %s", strings.Join(c.args, " "), m, got)
		}
	}
}
