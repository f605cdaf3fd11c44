package manager

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"shoal/api"
	"shoal/engine"
	"shoal/engine/duty"
	"shoal/engine/monitor"
	"shoal/internal/clock"
	"shoal/manager/control"
	"shoal/security"
	"shoal/statemachine"
)

// Options configure one replica. Zero values take the defaults named.
type Options struct {
	DataDir   string
	ReplicaID uint64            // default 1
	RaftAddr  string            // default: recorded in DataDir, else a free loopback port
	Peers     map[uint64]string // default: this replica alone
	// Join starts a replica the cluster already added to every group's
	// membership (engine.Config.Join); Peers must then be empty.
	Join         bool
	Groups       int    // default: recorded in DataDir, else engine.DefaultGroups
	RaftLogLevel string // default "error"
	APIAddr      string // required; "127.0.0.1:0" picks a free port
	Pprof        bool
	SyncInterval time.Duration // pushed to agents; default 1m
	// EventHistory is how many recent changes the event stream can resume
	// from; default 1,048,576 (at least 1,024): at 24 bytes each, 24 MB
	// once full. A stream that falls further behind than this must read
	// the state again, which at a million tasks costs more than the ring.
	EventHistory int
	MinHeartbeat time.Duration // shortest heartbeat period; default 1s
	// MassExpiryShare and MassExpiryHold tune the node monitor's
	// mass-expiry brake (monitor.Config); zero: its defaults.
	MassExpiryShare float64
	MassExpiryHold  time.Duration
	// FailoverGrace is how long after becoming leader no node is marked
	// down or orphaned (serve --failover-grace); default 30s
	// (monitor.DefaultFailoverGrace), negative: none. At most
	// OrphanTimeout.
	FailoverGrace time.Duration
	// OrphanTimeout is how long a node stays down before the leader
	// orphans it: its tasks orphaned, its quarantined addresses freed
	// (serve --orphan-timeout); default 24h (monitor.DefaultOrphanTimeout).
	// At least 3 × MinHeartbeat (monitor.Config.DownTTL).
	OrphanTimeout time.Duration
	// MaxAPIConns caps the API's open connections (api.Guard); default:
	// the open-file limit less an eighth.
	MaxAPIConns int
	// MaxHandshakes caps the API's TLS handshakes under way at once
	// (api.LimitHandshakes); default api.DefaultHandshakes.
	MaxHandshakes int
	// Engine tunes the engine beyond the fields above (RTT, timeouts...).
	Engine engine.Config
	// TLS, if set, serves the API over TLS with authentication and makes
	// Raft traffic mutual TLS. Nil: plain HTTP and TCP (dev, --insecure).
	TLS *TLS
	// Logf receives the duties' and the API's log lines. Default: discard.
	Logf func(format string, args ...any)
}

// TLS is a manager replica's security material.
type TLS struct {
	CA *security.CA
	// Cert is this replica's manager certificate (chain: leaf, managers
	// CA, root) with its key.
	Cert tls.Certificate
	// Tokens holds the join secrets.
	Tokens api.TokenStore
	// RaftCAFile (the managers CA), RaftCertFile and RaftKeyFile are the
	// PEM files dragonboat reads.
	RaftCAFile, RaftCertFile, RaftKeyFile string
	// WorkerLifetime is the lifetime of agents' certificates; default 90
	// days.
	WorkerLifetime time.Duration
}

// Manager is one running replica.
type Manager struct {
	E       *engine.Engine
	Feed    *control.Feed
	API     *api.Server
	APIAddr string // the address the API listens on

	mon *duty.MonitorDuty
	sub *duty.Submitter
}

// Start opens the engine with the leader duties and serves the API.
func Start(o Options) (*Manager, error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.EventHistory <= 0 {
		o.EventHistory = 1 << 20
	}
	if o.MinHeartbeat <= 0 {
		o.MinHeartbeat = time.Second
	}
	var feed atomic.Pointer[control.Feed]
	sig := duty.NewSignal()
	obSig := duty.NewOutboxSignal()
	tracker := duty.NewTracker()
	cfg := o.Engine
	cfg.DataDir, cfg.ReplicaID, cfg.RaftAddr, cfg.Peers, cfg.Groups = o.DataDir, o.ReplicaID, o.RaftAddr, o.Peers, o.Groups
	cfg.RaftLogLevel, cfg.Join = o.RaftLogLevel, o.Join
	var sec *api.Security
	var serverTLS *tls.Config
	if t := o.TLS; t != nil {
		cfg.RaftCAFile, cfg.RaftCertFile, cfg.RaftKeyFile = t.RaftCAFile, t.RaftCertFile, t.RaftKeyFile
		cert := t.Cert
		stc := security.ServerTLS(func() *tls.Certificate { return &cert }, t.CA.RootPool())
		if err := security.ShareTickets(stc, t.CA); err != nil {
			o.Logf("TLS sessions of other managers will not resume here: %v", err)
		}
		if err := security.IdentityTickets(stc, t.CA, time.Now); err != nil {
			return nil, err
		}
		serverTLS = stc
		sec = &api.Security{CA: t.CA, Tokens: t.Tokens, WorkerLifetime: t.WorkerLifetime,
			PeerTLS: security.ClientTLS(t.CA.RootPool(), func() *tls.Certificate { return &cert })}
	}
	if cfg.Logf == nil {
		cfg.Logf = o.Logf
	}
	// The feed is made before any group starts (OnOpen): it sees every
	// entry each group applies and every snapshot it recovers, from the
	// replica's start, so its journals never claim changes they missed.
	// (Made after Open, it missed what the groups recovered meanwhile, and
	// read how far that went from states that could not always be read
	// yet: a group whose read failed counted as known from index 0, and a
	// restarted replica answered an agent's poll from before its snapshot
	// with an INCREMENTAL that lacked the changes up to it: a task whose
	// desired state changed there was never started.)
	cfg.OnOpen = func(groups int) { feed.Store(control.NewFeed(groups, nil, o.EventHistory, 512)) }
	cfg.OnApply = func(g int, index uint64, effects []statemachine.Effect) {
		sig.OnApply(g, index, effects)
		obSig.OnApply(g, index, effects)
		tracker.OnApply(g, index, effects)
		if f := feed.Load(); f != nil {
			f.OnApply(g, index, effects)
		}
	}
	cfg.OnRecover = func(g int, index uint64) {
		tracker.OnRecover(g, index)
		if f := feed.Load(); f != nil {
			f.Raise(g, index)
		}
	}
	e, err := engine.Open(cfg)
	if err != nil {
		return nil, err
	}
	// The API listens once the engine is open: a restarting replica
	// replays its log first (seconds under load), and connections the
	// kernel queued for it meanwhile hung until their clients gave up,
	// where a refusal sends them on to another manager at once.
	ln, err := net.Listen("tcp", o.APIAddr)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("API address %s: %w", o.APIAddr, err)
	}
	ln = api.Guard(ln, o.MaxAPIConns, nil, o.Logf)
	var srv *api.Server // set before it serves, so before any handshake
	if serverTLS != nil {
		ln = api.LimitHandshakes(ln, serverTLS, o.MaxHandshakes, 0, func(h api.Handshake) { srv.ObserveHandshake(h) })
	}
	f := feed.Load()
	// The duties and the API submit through sub: removals checked with
	// every service group first, node and network changes delivered to
	// the service groups before a submission returns. The duties keep the
	// engine's time.
	sub := duty.NewSubmitter(e, cfg.Logf)
	clk := cfg.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	driver := duty.NewDriver(sub, duty.DriverConfig{Signal: sig, Tracker: tracker, Clock: clk, Logf: o.Logf})
	mon, err := duty.NewMonitorDuty(sub, duty.MonitorConfig{Clock: clk, Logf: o.Logf,
		Monitor: monitor.Config{MinTTL: o.MinHeartbeat, MaxTTL: 30 * time.Second, FailoverGrace: o.FailoverGrace,
			OrphanTimeout: o.OrphanTimeout, MassExpiryShare: o.MassExpiryShare, MassExpiryHold: o.MassExpiryHold}})
	if err != nil {
		e.Close()
		ln.Close()
		return nil, err
	}
	e.AddDuty(driver)
	e.AddDuty(mon)
	e.AddDuty(duty.NewTimerDuty(sub, duty.TimerConfig{Clock: clk, Logf: o.Logf}))
	e.AddDuty(duty.NewOutboxDuty(sub, duty.OutboxConfig{Clock: clk, Signal: obSig, Logf: o.Logf}))
	srv, err = api.New(api.Config{Reads: e, Leaders: e, Self: e, Replicas: e, Stats: e, ToGroup: e,
		ClockBound: e.ClockBound(), Submitter: sub, Feed: f, Monitor: monitorFront{mon},
		Placement: placementFront{driver}, Pprof: o.Pprof, SyncInterval: o.SyncInterval, Security: sec, Logf: o.Logf})
	if err != nil {
		e.Close()
		ln.Close()
		return nil, err
	}
	go func() {
		if err := srv.Serve(ln); err != nil {
			o.Logf("shoal: API stopped: %v", err)
		}
	}()
	return &Manager{E: e, Feed: f, API: srv, APIAddr: ln.Addr().String(), mon: mon, sub: sub}, nil
}

// Close stops the API, then the engine.
func (m *Manager) Close() {
	_ = m.API.Close()
	m.E.Close()
}

// Register records this replica's API address in the cluster group once
// the cluster has a leader, retrying until it is applied or ctx ends.
func (m *Manager) Register(ctx context.Context) error {
	for ctx.Err() == nil {
		if err := m.E.WaitReady(ctx); err != nil {
			return err
		}
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := m.E.Submit(c, statemachine.Command{Kind: statemachine.CmdSetManager, Seq: m.E.ReplicaID(), Name: m.APIAddr})
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return ctx.Err()
}
