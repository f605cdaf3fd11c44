package loadgen

import (
	"slices"
	"strings"

	"shoal/loadgen/report"
)

// counterSince is how much a counter grew from prev to now; a counter
// below its last reading started again (its replica restarted), so all of
// it is new.
func counterSince(prev, now uint64) uint64 {
	if now < prev {
		return now
	}
	return now - prev
}

// agentCalls adds up the replicas' agent call counters per endpoint.
type agentCalls struct {
	last  map[uint64]map[string]uint64 // replica -> endpoint -> last reading
	total map[string]uint64
}

func newAgentCalls() *agentCalls {
	return &agentCalls{last: map[uint64]map[string]uint64{}, total: map[string]uint64{}}
}

// add takes one replica's counters.
func (a *agentCalls) add(replica uint64, calls map[string]uint64) {
	last := a.last[replica]
	if last == nil {
		last = map[string]uint64{}
		a.last[replica] = last
	}
	for ep, n := range calls {
		a.total[ep] += counterSince(last[ep], n)
		last[ep] = n
	}
}

// report returns the endpoints in name order, spread over agents and
// seconds.
func (a *agentCalls) report(agents int, seconds float64) []report.AgentCalls {
	var out []report.AgentCalls
	for ep, n := range a.total {
		c := report.AgentCalls{Endpoint: ep, Total: n}
		if agents > 0 && seconds > 0 {
			c.PerAgentPerMinute = float64(n) / float64(agents) / (seconds / 60)
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(x, y report.AgentCalls) int { return strings.Compare(x.Endpoint, y.Endpoint) })
	return out
}
