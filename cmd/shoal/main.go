// Command shoal is Shoal's single binary: manager, agent, load generator and
// CLI client. Subcommands arrive as the parts behind them become real.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

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
			fmt.Fprintln(cmd.OutOrStdout(), "shoal", version)
		},
	})
	root.AddCommand(newServeCmd(), newAgentCmd(), newServiceCmd(), newNodeCmd(), newNetworkCmd(), newStatusCmd())
	return root
}

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "shoal:", err)
		os.Exit(1)
	}
}
