package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"os"
	"slices"
	"strings"
)

// echartsJS is Apache ECharts (dist/echarts.min.js of the npm package,
// Apache-2.0, license header intact; see assets/NOTICE). The report inlines
// it so that it opens offline: go-echarts' default is a <script src> on a
// CDN, which the report never uses.
//
//go:embed assets/echarts.min.js
var echartsJS string

// EchartsVersion is the version of the embedded ECharts.
const EchartsVersion = "5.6.0"

//go:embed assets/page.html.tmpl
var pageTmpl string

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"f1":      func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"f2":      func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"f0":      func(v float64) string { return fmt.Sprintf("%.0f", v) },
	"mib":     func(v uint64) string { return fmt.Sprintf("%.1f MiB", float64(v)/(1<<20)) },
	"cores":   coresText,
	"pertask": perTaskText,
	"join": func(s []string) string {
		if len(s) == 0 {
			return "—"
		}
		return strings.Join(s, ", ")
	},
}).Parse(pageTmpl))

// htmlChart is a chart as the page template sees it.
type htmlChart struct {
	ID, Title string
	Points    int
	Element   template.HTML // go-echarts' container
	Script    template.HTML // go-echarts' init + setOption, then shoalMark
}

type htmlPage struct {
	R          *Report
	Pass       bool
	Failures   []string
	Params     [][2]string
	Counts     [][2]string
	Charts     []htmlChart
	Missing    []string // charts left out for lack of data
	QuiesceOff bool     // convergence was not measured
	EchartsJS  template.JS
	EchartsVer string
}

// WriteHTML writes r as one self-contained HTML page: the summary, the
// parameters, the phases, the invariant table and the charts (tasks
// running, throughput, latency percentiles and distribution, heap per
// replica, CPU per process), with ECharts inlined — the page loads
// nothing from the network.
//
// Each chart's section carries data-chart (its ID) and data-points (the
// points it was given); once ECharts has drawn it, the page sets
// data-rendered to the points ECharts holds (`make report-check` compares
// the two in headless Chromium).
func WriteHTML(w io.Writer, r *Report) error {
	p := htmlPage{R: r, EchartsJS: template.JS(echartsJS), EchartsVer: EchartsVersion}
	p.Failures = failures(r)
	p.Pass = len(p.Failures) == 0
	p.QuiesceOff = !r.quiesceRan()
	p.Params = params(r)
	p.Counts = counts(r)
	built := buildCharts(r)
	for _, c := range built {
		p.Charts = append(p.Charts, htmlChart{ID: c.ID, Title: c.Title, Points: c.Points,
			Element: template.HTML(c.Element), Script: template.HTML(c.Script)})
	}
	for _, id := range chartIDs {
		if !slices.ContainsFunc(built, func(c chart) bool { return c.ID == id }) {
			p.Missing = append(p.Missing, id)
		}
	}
	return page.Execute(w, p)
}

// WriteHTMLFile writes the HTML report of r to path.
func WriteHTMLFile(path string, r *Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteHTML(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// failures are the reasons the run failed, as the command decides them.
func failures(r *Report) []string {
	var out []string
	if r.Violations > 0 {
		out = append(out, fmt.Sprintf("%d invariant violations", r.Violations))
	}
	if !r.Converged && slices.Contains(r.Params.Phases, "quiesce") {
		out = append(out, "the cluster did not converge")
	}
	for _, th := range r.Thresholds {
		if !th.OK {
			out = append(out, "threshold "+th.Expr+" failed")
		}
	}
	return out
}

func params(r *Report) [][2]string {
	p := r.Params
	managers := fmt.Sprint(p.Managers)
	if len(p.Join) > 0 {
		managers = "joined " + strings.Join(p.Join, ", ")
	}
	groups := "server default"
	if p.Groups > 0 {
		groups = fmt.Sprint(p.Groups)
	}
	return [][2]string{
		{"seed", fmt.Sprint(r.Seed)},
		{"agents", fmt.Sprint(p.Agents)},
		{"tasks", fmt.Sprint(p.Tasks)},
		{"services", fmt.Sprint(p.Services)},
		{"networks", fmt.Sprint(p.Networks)},
		{"managers", managers},
		{"groups", groups},
		{"phases", strings.Join(p.Phases, ", ")},
		{"sync interval", fmt.Sprintf("%gs", p.SyncSeconds)},
		{"ramp timeout", fmt.Sprintf("%gs", p.RampSeconds)},
		{"churn", fmt.Sprintf("%gs at %g ops/s", p.ChurnSeconds, p.ChurnRate)},
		{"faults", fmt.Sprintf("%gs, up to %g%% of agents, leader kill every %gs", p.FaultSeconds, 100*p.FaultShare, p.LeaderKillSecs)},
		{"quiesce timeout", fmt.Sprintf("%gs", p.QuiesceSeconds)},
	}
}

func counts(r *Report) [][2]string {
	c := r.Counts
	return [][2]string{
		{"networks created", fmt.Sprint(c.NetworksCreated)},
		{"services created", fmt.Sprint(c.ServicesCreated)},
		{"scales / updates", fmt.Sprintf("%d / %d", c.Scales, c.Updates)},
		{"removes / re-creates", fmt.Sprintf("%d / %d", c.Removes, c.Recreates)},
		{"task crashes", fmt.Sprint(c.Crashes)},
		{"agent disconnects / vanishes", fmt.Sprintf("%d / %d", c.Disconnects, c.Vanishes)},
		{"leader kills", fmt.Sprint(c.LeaderKills)},
		{"agents back after each leader kill", killRecoveryText(c)},
		{"API errors", apiErrorsText(c)},
		{"events / transitions", fmt.Sprintf("%d / %d", c.Events, c.Transitions)},
		{"tasks seen", fmt.Sprint(c.TasksSeen)},
		{"stream reconnects / resyncs", fmt.Sprintf("%d / %d", c.StreamReconnects, c.StreamResyncs)},
		{"longest agent heartbeat gap", fmt.Sprintf("%.1fs", c.BeatAgeMax)},
		{"agent calls per agent per minute", agentCallsText(r.AgentCalls)},
	}
}

// apiErrorsText is the API error count, with the first ones described.
func apiErrorsText(c Counts) string {
	t := fmt.Sprint(c.APIErrors)
	if len(c.APIErrorList) > 0 {
		t += " (" + strings.Join(c.APIErrorList, "; ") + ")"
	}
	if c.Interrupted > 0 {
		t += fmt.Sprintf("; %s cut short by their phase's end", calls(c.Interrupted))
	}
	return t
}

// killRecoveryText says, per leader kill timed, when a replica led again
// and when half, nine tenths and all of the agents were back.
func killRecoveryText(c Counts) string {
	if len(c.LeaderKillDetail) == 0 {
		return "—"
	}
	var s []string
	for _, k := range c.LeaderKillDetail {
		s = append(s, fmt.Sprintf("led again %.2fs; half %.2fs, 90%% %.2fs, all %.2fs", k.LedAgainSeconds, k.HalfSeconds, k.P90Seconds, k.AllSeconds))
	}
	return strings.Join(s, " · ")
}

// agentCallsText lists the agents' calls per endpoint, e.g.
// "heartbeat 12.0, status 3.1".
func agentCallsText(calls []AgentCalls) string {
	if len(calls) == 0 {
		return "not read"
	}
	var s []string
	for _, c := range calls {
		s = append(s, fmt.Sprintf("%s %.1f", c.Endpoint, c.PerAgentPerMinute))
	}
	return strings.Join(s, ", ")
}

// calls is "1 call" or "n calls".
func calls(n int) string {
	if n == 1 {
		return "1 call"
	}
	return fmt.Sprintf("%d calls", n)
}
