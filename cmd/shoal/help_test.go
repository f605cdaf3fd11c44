package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// pflag reads a `quoted` word in a flag's usage as the name of the value
// it takes, so a usage that quotes a command prints garbled --help
// (`--token shoal token manager   the manager join token`). Every flag of
// every command prints as its own type.
func TestFlagUsageQuotesNoValueName(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			n++
			if strings.Contains(f.Usage, "`") {
				name, _ := pflag.UnquoteUsage(f)
				t.Errorf("shoal %s --%s prints as `--%s %s` in --help: its usage quotes with backticks", strings.TrimPrefix(c.CommandPath(), "shoal "), f.Name, f.Name, name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
	if n < 100 {
		t.Fatalf("walked %d flags; is every command under the root?", n)
	}
}

// A join token in the environment (the README exports SHOAL_JOIN_TOKEN) is
// a secret: --help must not print it as the flag's default.
func TestHelpDoesNotPrintTheJoinToken(t *testing.T) {
	const secret = "SHOAL-1-0123456789abcdef-doNotPrintMe"
	t.Setenv("SHOAL_JOIN_TOKEN", secret)
	for _, cmd := range []string{"agent", "serve"} {
		var out bytes.Buffer
		root := newRoot()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs([]string{cmd, "--help"})
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), "doNotPrintMe") {
			t.Errorf("shoal %s --help prints the join token from SHOAL_JOIN_TOKEN:\n%s", cmd, out.String())
		}
		if !strings.Contains(out.String(), "--token") {
			t.Errorf("shoal %s --help has no --token:\n%s", cmd, out.String())
		}
	}
}
