// Command summary prints one table of the benchmark results that `make perf`
// collected: every benchmark with its ns/op, allocations and custom metrics.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"golang.org/x/perf/benchfmt"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: summary FILE.bench.txt...")
		os.Exit(2)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "package\tbenchmark\tvalue\tunit\t")
	for _, path := range os.Args[1:] {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		pkg := strings.TrimSuffix(filepath.Base(path), ".bench.txt")
		r := benchfmt.NewReader(f, path)
		for r.Scan() {
			res, ok := r.Result().(*benchfmt.Result)
			if !ok {
				continue
			}
			for _, v := range res.Values {
				fmt.Fprintf(tw, "%s\t%s\t%.4g\t%s\t\n", pkg, res.Name.Full(), v.Value, v.Unit)
			}
		}
		if err := r.Err(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		f.Close()
	}
	tw.Flush()
}
