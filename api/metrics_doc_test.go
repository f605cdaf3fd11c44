package api

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/valyala/fasthttp"

	"shoal/manager/control"
	"shoal/statemachine"
)

// scrapeMetrics answers GET /metrics of a server over one state with a
// node, after requests, refusals and handshakes that create the families
// written only once something happened.
func scrapeMetrics(t *testing.T) (string, *Server) {
	t.Helper()
	st := statemachine.New(statemachine.Config{})
	var out statemachine.Output
	st.Apply([]statemachine.Command{
		{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{ID: 1, Name: "n1", Status: statemachine.NodeReady}},
	}, 1, 1_700_000_000e9, &out)
	r := &replica{st: st, leader: 1}
	s, err := New(Config{Reads: r, Leaders: r, Self: r, Replicas: r, Stats: r, ToGroup: r, Submitter: r,
		Feed: control.NewFeed(1, nil, 16, 16), Monitor: beats{ttl: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	get := func(path string) string {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("GET")
		ctx.Request.SetRequestURI(path)
		s.handle(&ctx)
		return string(ctx.Response.Body())
	}
	get("/v1/nodes")
	s.metrics.denied("no_certificate")
	s.ObserveHandshake(Handshake{Resumed: true, Took: time.Millisecond})
	s.ObserveHandshake(Handshake{Took: time.Millisecond})
	s.ObserveHandshake(Handshake{Err: errors.New("bad certificate")})
	return get("/metrics"), s
}

// exposition is a /metrics text parsed by family.
type exposition struct {
	help, typ map[string]string
	samples   map[string]bool // every sample name (with _bucket, _sum, _count)
	families  []string        // in the order their samples came
}

func parseExposition(t *testing.T, text string) exposition {
	t.Helper()
	e := exposition{help: map[string]string{}, typ: map[string]string{}, samples: map[string]bool{}}
	done := map[string]bool{}
	cur := ""
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, help, _ := strings.Cut(rest, " ")
			e.help[name] = help
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			if _, ok := e.help[name]; !ok {
				t.Errorf("TYPE of %s before its HELP", name)
			}
			e.typ[name] = typ
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		e.samples[name] = true
		family := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && (e.typ[base] == "histogram" || e.typ[base] == "summary") {
				family = base
			}
		}
		if family != cur {
			if done[family] {
				t.Errorf("the samples of %s are not together", family)
			}
			done[family], cur = true, family
			e.families = append(e.families, family)
		}
		if e.typ[family] == "" || strings.TrimSpace(e.help[family]) == "" {
			t.Errorf("%s: HELP %q, TYPE %q before its first sample", family, e.help[family], e.typ[family])
		}
	}
	return e
}

// Every /metrics family has its # HELP (with text) and # TYPE lines before
// its samples, which come together; api/README.md names every family.
func TestMetricsHaveHelpTypeAndDocs(t *testing.T) {
	text, _ := scrapeMetrics(t)
	// Prometheus's own parser reads it (HELP and TYPE are checked
	// against the samples).
	parser := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := parser.TextToMetricFamilies(strings.NewReader(text)); err != nil {
		t.Errorf("Prometheus does not parse /metrics: %v", err)
	}
	e := parseExposition(t, text)
	if len(e.families) < 40 {
		t.Fatalf("only %d families:\n%s", len(e.families), text)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range e.families {
		if !strings.Contains(string(readme), "`"+f+"`") {
			t.Errorf("api/README.md does not document %s (%s)", f, e.typ[f])
		}
	}
}

var (
	metricName = regexp.MustCompile(`\b(shoal|go|process)_[a-z0-9_]+\b`)
	endpointEq = regexp.MustCompile(`endpoint=~?"([^"]+)"`)
)

// Every expression of the Grafana dashboard names metrics the server
// exports, and endpoints it has.
func TestGrafanaDashboardNamesExportedMetrics(t *testing.T) {
	text, s := scrapeMetrics(t)
	e := parseExposition(t, text)
	raw, err := os.ReadFile("../docs/grafana/shoal.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	endpoints := map[string]bool{}
	for _, rt := range s.routes() {
		endpoints[rt.name] = true
	}
	exprs := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs++
			names := metricName.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("%s: %q names no metric", p.Title, tg.Expr)
			}
			for _, n := range names {
				if !e.samples[n] {
					t.Errorf("%s: %s is not exported", p.Title, n)
				}
			}
			for _, m := range endpointEq.FindAllStringSubmatch(tg.Expr, -1) {
				for _, ep := range strings.Split(m[1], "|") {
					if !endpoints[ep] {
						t.Errorf("%s: no endpoint is named %s", p.Title, ep)
					}
				}
			}
		}
	}
	if exprs < 10 {
		t.Fatalf("the dashboard has %d expressions", exprs)
	}
}
