package report

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func loadSample(t *testing.T) *Report {
	t.Helper()
	b, err := os.ReadFile("testdata/sample.json")
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

var (
	scriptSrc  = regexp.MustCompile(`(?i)<script[^>]*\bsrc\s*=`)
	remoteRef  = regexp.MustCompile(`(?i)<(?:script|link|img|iframe)[^>]*(?:src|href)\s*=\s*["']?(?:https?:)?//`)
	chartOpen  = regexp.MustCompile(`<section class="chart" id="chart-([a-z_]+)" data-chart="([a-z_]+)" data-points="(\d+)">`)
	instanceOf = regexp.MustCompile(`echarts\.init\(document\.getElementById\('([a-z_]+)'\)`)
)

// TestHTMLSelfContained renders the checked-in sample run and checks the
// page stands alone: ECharts inlined (license header and all), no script
// or other asset from the network, one chart container per chart with
// data, each initialised once and marked for the browser check. If
// SHOAL_REPORT_HTML is set, the page is also written there (make
// report-check opens it in headless Chromium).
func TestHTMLSelfContained(t *testing.T) {
	r := loadSample(t)
	var buf bytes.Buffer
	if err := WriteHTML(&buf, r); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	if out := os.Getenv("SHOAL_REPORT_HTML"); out != "" {
		if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	if m := scriptSrc.FindString(html); m != "" {
		t.Errorf("page loads a script: %s", m)
	}
	if m := remoteRef.FindString(html); m != "" {
		t.Errorf("page references a remote asset: %s", m)
	}
	if strings.Contains(html, "go-echarts-assets") || strings.Contains(html, "cdn.jsdelivr") {
		t.Error("page mentions go-echarts' CDN assets")
	}
	if !strings.Contains(html, echartsJS) {
		t.Error("ECharts is not inlined whole")
	}
	if !strings.Contains(echartsJS, "Licensed to the Apache Software Foundation") || len(echartsJS) < 500_000 {
		t.Errorf("embedded echarts.min.js looks wrong (%d bytes, or its license header is missing)", len(echartsJS))
	}

	want := map[string]int{}
	for _, c := range buildCharts(r) {
		want[c.ID] = c.Points
	}
	if len(want) != len(chartIDs) {
		t.Errorf("the sample run should have data for all %d charts, has %d: %v", len(chartIDs), len(want), want)
	}
	got := map[string]int{}
	for _, m := range chartOpen.FindAllStringSubmatch(html, -1) {
		if m[1] != m[2] {
			t.Errorf("section id %s and data-chart %s differ", m[1], m[2])
		}
		n, _ := strconv.Atoi(m[3])
		if _, dup := got[m[2]]; dup {
			t.Errorf("chart %s appears twice", m[2])
		}
		got[m[2]] = n
	}
	for id, n := range want {
		if n == 0 {
			t.Errorf("chart %s has no data but is listed", id)
		}
		if got[id] != n {
			t.Errorf("chart %s: container with %d points, want %d", id, got[id], n)
		}
		if c := strings.Count(html, `id="`+id+`"`); c != 1 {
			t.Errorf("chart %s: %d ECharts containers, want 1", id, c)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d chart sections, want %d", len(got), len(want))
	}
	inits := instanceOf.FindAllStringSubmatch(html, -1)
	if len(inits) != len(want) {
		t.Errorf("%d echarts.init calls, want %d", len(inits), len(want))
	}
	if c := strings.Count(html, "shoalMark(goecharts_"); c != len(want) {
		t.Errorf("%d charts call shoalMark, want %d", c, len(want))
	}
	for _, inv := range r.Invariants {
		if !strings.Contains(html, `data-invariant="`+inv.Name+`"`) {
			t.Errorf("invariant %s missing from the table", inv.Name)
		}
	}
}

// TestHTMLLeavesOutEmptyCharts: a report without series (e.g. a run
// stopped early) still renders, with no chart for the data it lacks.
func TestHTMLLeavesOutEmptyCharts(t *testing.T) {
	r := loadSample(t)
	r.Series = Series{}
	for i := range r.Latencies {
		r.Latencies[i].Buckets = nil
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, r); err != nil {
		t.Fatal(err)
	}
	got := len(chartOpen.FindAllString(buf.String(), -1))
	if got != 1 || ChartsWithData(r) != 1 { // latency percentiles only
		t.Errorf("%d chart sections (%d with data), want 1", got, ChartsWithData(r))
	}
	if !strings.Contains(buf.String(), "No data for: tasks_running, throughput, latency_histogram, heap") {
		t.Error("missing charts are not named")
	}
}

// TestHTMLEscapesNames: names from the JSON file cannot break out of the
// chart scripts (go-echarts writes options unescaped).
func TestHTMLEscapesNames(t *testing.T) {
	r := loadSample(t)
	r.Phases[0].Name = "</script><script>alert(1)</script>"
	r.Latencies[0].Name = "x</script>"
	r.Invariants[0].Description = "<b>bold</b>"
	var buf bytes.Buffer
	if err := WriteHTML(&buf, r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "alert(1)</script>") || strings.Contains(buf.String(), "x</script>") || strings.Contains(buf.String(), "<b>bold") {
		t.Error("a name from the report reached the page unescaped")
	}
}

// A run with fleet workers shows each worker (host, agents, clock offset)
// and marks a lost one; a run without them has no fleet table.
func TestHTMLShowsFleetWorkers(t *testing.T) {
	r := loadSample(t)
	var buf bytes.Buffer
	if err := WriteHTML(&buf, r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), `id="fleet"`) {
		t.Fatal("a run without fleet workers shows a fleet table")
	}
	r.Fleet = &Fleet{LocalAgents: 100, WorkersLost: 1, LatencyClock: "the loadgen's clock", MergeOrder: "by offset-corrected time",
		Workers: []FleetWorker{
			{ID: 1, Host: "lg-a", Address: "10.0.0.5:41000", FirstAgent: 100, Agents: 450, CPUSeconds: 12.5, ClockOffsetMs: -1.25, ClockErrorMs: 0.2},
			{ID: 2, Host: "lg-b", Address: "10.0.0.6:41000", FirstAgent: 550, Agents: 450, CPUSeconds: 3, Lost: true},
		}}
	buf.Reset()
	if err := WriteHTML(&buf, r); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{`id="fleet"`, "lg-a (10.0.0.5:41000)", "450 from 100", "-1.250 ± 0.200 ms", `data-worker="2"`, "1 lost during the run", `<span class="bad">lost</span>`} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
