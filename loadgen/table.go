package loadgen

import (
	"io"

	"shoal/loadgen/report"
)

func writeTable(w io.Writer, r *report.Report) error { return report.WriteTable(w, r) }
