package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "shoal ") {
		t.Fatalf("unexpected output %q", out.String())
	}
}

func TestUnknownCommandFails(t *testing.T) {
	root := newRoot()
	root.SetArgs([]string{"no-such-command"})
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	if err := root.Execute(); err == nil {
		t.Fatal("an unknown command must fail")
	}
}
