// Command shoal is Shoal's single binary: manager, agent, load generator and
// CLI client. Subcommands arrive as the parts behind them become real.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// version and commit are set at build time with -ldflags "-X
// main.version=... -X main.commit=..." (make build does); without them the
// commit comes from the VCS stamp go build records.
var (
	version = "dev"
	commit  = ""
)

// versionLine is what `shoal version` prints: "shoal VERSION (commit C)".
func versionLine() string {
	c := commit
	modified := false
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && c == "":
				c = s.Value
			case s.Key == "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if c == "" {
		return "shoal " + version + " (commit unknown: built without VCS information)"
	}
	if len(c) > 12 {
		c = c[:12]
	}
	if modified && commit == "" {
		c += ", modified"
	}
	return "shoal " + version + " (commit " + c + ")"
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "shoal",
		Short:         "Shoal: a container/process orchestrator control plane",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), versionLine())
		},
	})
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(newServeCmd(), newAgentCmd(), newServiceCmd(), newStackCmd(), newNodeCmd(), newNetworkCmd(), newClusterCmd(), newStatusCmd(), newReplicaCmd(), newTokenCmd(), newLoadgenCmd(), newLoadgenFleetCmd())
	return root
}

// flagError says what a flag's value should be instead of passing on the
// number parser's own words ("strconv.ParseUint: parsing ...").
func flagError(_ *cobra.Command, err error) error {
	var ive *pflag.InvalidValueError
	var ne *strconv.NumError
	if !errors.As(err, &ive) || !errors.As(err, &ne) {
		return err
	}
	f := ive.GetFlag()
	want := "a number"
	switch f.Value.Type() {
	case "uint", "uint8", "uint16", "uint32", "uint64":
		want = "a whole number, 0 or more"
	case "int", "int8", "int16", "int32", "int64":
		want = "a whole number"
	}
	if errors.Is(ne.Err, strconv.ErrRange) {
		want += " within its range"
	}
	return fmt.Errorf("--%s %q: want %s", f.Name, ive.GetValue(), want)
}

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "shoal:", err)
		os.Exit(1)
	}
}
