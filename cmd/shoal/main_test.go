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

// A flag value the number parser refuses is answered in the user's terms:
// the flag, the value and what it should be, not the parser's own words.
func TestBadNumberFlagSaysWhatItWants(t *testing.T) {
	for _, c := range []struct{ args, want []string }{
		{[]string{"service", "create", "web", "--replicas", "-1", "--", "true"}, []string{`--replicas "-1"`, "0 or more"}},
		{[]string{"service", "create", "web", "--replicas", "99999999999", "--", "true"}, []string{`--replicas "99999999999"`, "within its range"}},
	} {
		root := newRoot()
		root.SetArgs(c.args)
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		err := root.Execute()
		if err == nil || strings.Contains(err.Error(), "strconv") {
			t.Fatalf("%v: %v, want an error without the parser's words", c.args, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q does not say %q", c.args, err, w)
			}
		}
	}
}
