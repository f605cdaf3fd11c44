package loadgen

import (
	"slices"
	"strconv"

	"shoal/loadgen/report"
)

// proposalCounts adds up the replicas' proposal counters per group. A
// replica's counters start again when it restarts: a value below the last
// one read is all new.
type proposalCounts struct {
	last   map[uint64]map[string][2]uint64 // replica -> group -> {proposals, commands}
	groups map[int]*report.GroupLoad
	// firstTerm and lastTerm are the highest Raft term per group seen at
	// the first reading and since.
	firstTerm, lastTerm map[int]uint64
}

func newProposalCounts() *proposalCounts {
	return &proposalCounts{last: map[uint64]map[string][2]uint64{}, groups: map[int]*report.GroupLoad{},
		firstTerm: map[int]uint64{}, lastTerm: map[int]uint64{}}
}

// add takes one replica's counters; it returns the proposals new since
// that replica's last reading, per group.
func (p *proposalCounts) add(replica uint64, proposals, commands map[string]uint64, delta map[int]uint64) {
	last := p.last[replica]
	if last == nil {
		last = map[string][2]uint64{}
		p.last[replica] = last
	}
	for g, n := range proposals {
		gi, err := strconv.Atoi(g)
		if err != nil {
			continue
		}
		c := commands[g]
		prev := last[g]
		dn, dc := n-prev[0], c-prev[1]
		if n < prev[0] || c < prev[1] { // restarted
			dn, dc = n, c
		}
		last[g] = [2]uint64{n, c}
		gl := p.groups[gi]
		if gl == nil {
			gl = &report.GroupLoad{Group: gi}
			p.groups[gi] = gl
		}
		gl.Proposals += dn
		gl.Commands += dc
		delta[gi] += dn
	}
}

// terms takes one replica's Raft terms per group.
func (p *proposalCounts) terms(terms map[string]uint64) {
	for g, t := range terms {
		gi, err := strconv.Atoi(g)
		if err != nil || t == 0 {
			continue
		}
		if _, ok := p.firstTerm[gi]; !ok {
			p.firstTerm[gi] = t
		}
		p.lastTerm[gi] = max(p.lastTerm[gi], t)
	}
}

// peak records one second's proposals per group.
func (p *proposalCounts) peak(delta map[int]uint64, seconds float64) {
	for g, n := range delta {
		if gl := p.groups[g]; gl != nil && seconds > 0 {
			gl.PeakRate = max(gl.PeakRate, float64(n)/seconds)
		}
	}
}

// report returns the groups in order, with rates over seconds.
func (p *proposalCounts) report(seconds float64) []report.GroupLoad {
	var out []report.GroupLoad
	for _, gl := range p.groups {
		g := *gl
		if seconds > 0 {
			g.PerSecond = float64(g.Proposals) / seconds
		}
		if g.Proposals > 0 {
			g.MeanBatch = float64(g.Commands) / float64(g.Proposals)
		}
		if f, ok := p.firstTerm[g.Group]; ok {
			g.Elections = p.lastTerm[g.Group] - f
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b report.GroupLoad) int { return a.Group - b.Group })
	return out
}
