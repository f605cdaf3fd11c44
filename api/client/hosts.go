package client

import (
	"runtime"
	"strings"
	"sync"
	"weak"

	"github.com/valyala/fasthttp"
)

// An agent's calls go to a fasthttp.HostClient per manager, made from the
// settings of the fasthttp.Client the agent was given, rather than
// through that Client. A fasthttp.Client runs a goroutine of its own
// that wakes every 10 s for as long as it holds a connection (to drop
// host clients that have none), and looks its host client up by the
// request's host under a lock at every call. An agent holds connections
// to its managers for its whole life, so every agent woke every 10 s for
// nothing: at 10,000 simulated agents 1,000 wake-ups a second, beside
// about 2,000 heartbeats. A real agent has the same goroutine.
//
// Agents that share one fasthttp.Client (the plain-HTTP pool of a
// simulated fleet) share its host clients, and so its connections, as
// they did.

// hostSet is the host clients made from one fasthttp.Client's settings,
// by base URL (scheme://host:port).
type hostSet struct {
	cfg weak.Pointer[fasthttp.Client] // alive while an AgentClient holds it
	mu  sync.Mutex
	m   map[string]*fasthttp.HostClient
}

var hostSets struct {
	sync.Mutex
	m map[weak.Pointer[fasthttp.Client]]*hostSet
}

// hostSetOf returns the host set of hc, shared by every AgentClient made
// with hc; it is forgotten once hc is.
func hostSetOf(hc *fasthttp.Client) *hostSet {
	k := weak.Make(hc)
	hostSets.Lock()
	defer hostSets.Unlock()
	if s := hostSets.m[k]; s != nil {
		return s
	}
	if hostSets.m == nil {
		hostSets.m = map[weak.Pointer[fasthttp.Client]]*hostSet{}
	}
	s := &hostSet{cfg: k, m: map[string]*fasthttp.HostClient{}}
	hostSets.m[k] = s
	runtime.AddCleanup(hc, func(k weak.Pointer[fasthttp.Client]) {
		hostSets.Lock()
		delete(hostSets.m, k)
		hostSets.Unlock()
	}, k)
	return s
}

// get returns the host client of base, made at its first call.
func (s *hostSet) get(base string) *fasthttp.HostClient {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.m[base]; h != nil {
		return h
	}
	h := hostClientOf(s.cfg.Value(), base)
	s.m[base] = h
	return h
}

// closeIdle closes every idle connection of the set.
func (s *hostSet) closeIdle() {
	s.mu.Lock()
	hs := make([]*fasthttp.HostClient, 0, len(s.m))
	for _, h := range s.m {
		hs = append(hs, h)
	}
	s.mu.Unlock()
	for _, h := range hs {
		h.CloseIdleConnections()
	}
}

// hostClientOf is the host client c would make for base (as
// fasthttp.Client does for a request's host).
func hostClientOf(c *fasthttp.Client, base string) *fasthttp.HostClient {
	isTLS := strings.HasPrefix(base, "https://")
	host := base[strings.Index(base, "://")+3:]
	return &fasthttp.HostClient{
		Addr:                          fasthttp.AddMissingPort(host, isTLS),
		Transport:                     c.Transport,
		Name:                          c.Name,
		NoDefaultUserAgentHeader:      c.NoDefaultUserAgentHeader,
		Dial:                          c.Dial,
		DialTimeout:                   c.DialTimeout,
		DialDualStack:                 c.DialDualStack,
		IsTLS:                         isTLS,
		TLSConfig:                     c.TLSConfig,
		MaxConns:                      c.MaxConnsPerHost,
		MaxIdleConnDuration:           c.MaxIdleConnDuration,
		MaxConnDuration:               c.MaxConnDuration,
		MaxIdemponentCallAttempts:     c.MaxIdemponentCallAttempts,
		ReadBufferSize:                c.ReadBufferSize,
		WriteBufferSize:               c.WriteBufferSize,
		ReadTimeout:                   c.ReadTimeout,
		WriteTimeout:                  c.WriteTimeout,
		MaxResponseBodySize:           c.MaxResponseBodySize,
		DisableHeaderNamesNormalizing: c.DisableHeaderNamesNormalizing,
		DisablePathNormalizing:        c.DisablePathNormalizing,
		MaxConnWaitTimeout:            c.MaxConnWaitTimeout,
		RetryIf:                       c.RetryIf,
		RetryIfErr:                    c.RetryIfErr,
		RetryIfErrUpstream:            c.RetryIfErrUpstream,
		ConnPoolStrategy:              c.ConnPoolStrategy,
		StreamResponseBody:            c.StreamResponseBody,
	}
}
