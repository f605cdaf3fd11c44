package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"sort"
)

// headroom is how many addresses a network has per base task, per service
// group: a network's blocks are split evenly among the service groups and a
// service allocates only from its own group's share, so each service gets
// its own network of groups × headroom × replicas addresses (rounded up to
// a power of two). Scale-ups (up to 1.3×), start-first updates and the
// quarantine until the next sync fit; rolling updates wrap the allocator
// around, so released addresses are reused.
const headroom = 2

// Service is one planned service.
type Service struct {
	Name     string
	Network  string
	Replicas int // base replicas; the desired count at quiescence
	// LostAfter > 0 gives the service a disconnect window (tasks of a
	// disconnected node are replaced and reconciled when it returns).
	LostAfter bool
}

// Network is one planned network.
type Network struct {
	Name   string
	Subnet string
	Load   int // base tasks on it
}

// Plan is the seeded workload.
type Plan struct {
	Networks []Network
	Services []Service
	// Constraints are placed on every service: with --join, only the
	// run's simulated nodes (the cluster's own nodes run real processes).
	Constraints []string
}

// NewPlan plans services whose replicas add up to tasks, each on a network
// of its own sized for a cluster of `groups` service groups.
func NewPlan(seed uint64, tasks, services, groups int) Plan {
	r := rand.New(rand.NewPCG(seed, 0x91a7))
	services = max(1, min(services, max(tasks, 1)))
	groups = max(groups, 1)
	w := make([]float64, services)
	sum := 0.0
	for i := range w {
		w[i] = 0.5 + r.Float64()
		sum += w[i]
	}
	var p Plan
	left := tasks
	for i := range services {
		n := int(math.Round(float64(tasks) * w[i] / sum))
		if i == services-1 || n > left {
			n = left
		}
		n = max(n, 0)
		left -= n
		p.Services = append(p.Services, Service{Name: fmt.Sprintf("svc-%03d", i), Replicas: n, LostAfter: i%3 == 2})
	}
	// Largest networks first, so that consecutive subnets stay aligned.
	order := make([]int, len(p.Services))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return p.Services[order[i]].Replicas > p.Services[order[j]].Replicas })
	next := uint32(10) << 24
	for _, i := range order {
		s := &p.Services[i]
		b := 2
		for 1<<b < groups*max(headroom*s.Replicas+2, 4) {
			b++
		}
		a := netip.AddrFrom4([4]byte{byte(next >> 24), byte(next >> 16), byte(next >> 8), byte(next)})
		s.Network = fmt.Sprintf("net-%03d", i)
		p.Networks = append(p.Networks, Network{Name: s.Network, Subnet: netip.PrefixFrom(a, 32-b).String(), Load: s.Replicas})
		next += 1 << b
	}
	return p
}

// Total returns the base tasks of the plan.
func (p Plan) Total() int {
	n := 0
	for _, s := range p.Services {
		n += s.Replicas
	}
	return n
}
