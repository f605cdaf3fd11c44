package main

import (
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
