// Package report is the schema of a loadgen run's machine-readable report
// (`shoal loadgen --json FILE`), and its plain-text summary table.
//
// The one idea: everything a later reader (an HTML renderer, a baseline
// comparison, a CI threshold) needs from a run is in Report, with units in
// the field names (seconds, bytes, milliseconds). The top-level fields
// tasks_running, violations, converge_seconds and heap_bytes_per_task are a
// contract: they keep their names and meaning.
//
// WriteHTML renders a Report as one self-contained page (`--report
// FILE.html`): tables, and charts drawn by go-echarts with Apache ECharts
// embedded (assets/echarts.min.js, inlined into the page), so that the
// report opens offline. `make report-check` opens the sample run's page in
// headless Chromium with networking off and checks every chart was drawn.
package report
