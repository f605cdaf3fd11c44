package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// An agent's TLS connections are set up by tlsDialer rather than by the
// HTTP client, for two reasons seen when a fleet of 10,000 moves to a new
// leader at once (perf/NOTEBOOK.md, "Reconnect storm"):
//
//   - The HTTP client bounds a handshake by its write timeout (30 s), not
//     by the call's deadline, and fails the call when the handshake ends
//     after that deadline, closing the connection both sides just paid
//     for. Under a reconnect storm handshakes take seconds, so heartbeats
//     were failed late and their handshakes thrown away, and the retry
//     paid for another. Here a call waits for its connection no longer
//     than its deadline; a handshake it gave up goes on, and the next call
//     to that manager takes it over (waiting for it, or taking the
//     connection it made) instead of starting another.
//   - A connection that will resume a session (a ticket is held: every
//     manager of a cluster takes every other's) offers only an X25519 key
//     share. The post-quantum half (ML-KEM) of the hybrid exchange cost
//     more than half the CPU of a resumed handshake (client and server
//     together); a resumed session's keys also derive from the resumption
//     secret of the full handshake it resumes, which used the hybrid
//     exchange, and the ticket travels encrypted with a symmetric key.

// handshakeLimit bounds a connection's set-up (TCP and TLS) whoever waits
// for it; the HTTP client's write timeout bounded it before.
const handshakeLimit = 30 * time.Second

// keptFor is how long a connection whose caller gave up waits for another
// call to the same manager before it is closed.
const keptFor = 10 * time.Second

// errSetupTimeout: the call's deadline passed while its connection was
// still being set up (the set-up goes on for the next call).
var errSetupTimeout = errors.New("the connection (TLS handshake) was still being set up when the call's time ran out; the next call takes it over")

// Dials counts what the agents' TLS dialers of this process did.
var Dials DialStats

// DialStats counts what tlsDialer did, for tests and debugging.
type DialStats struct {
	Started   atomic.Int64 // set-ups started
	Resuming  atomic.Int64 // of which offered to resume a session (X25519 only)
	GivenUp   atomic.Int64 // calls that stopped waiting for a set-up
	TakenOver atomic.Int64 // set-ups a later call took over
	Dropped   atomic.Int64 // connections made for nobody, closed unused
}

type tlsDialer struct {
	full, resume *tls.Config
	stats        *DialStats

	mu      sync.Mutex
	orphans map[string][]*setup // per address, set-ups whose caller gave up
}

// setup is one connection being set up.
type setup struct {
	done chan struct{}
	conn net.Conn
	err  error
}

func newTLSDialer(cfg *tls.Config, stats *DialStats) *tlsDialer {
	resume := cfg.Clone()
	resume.CurvePreferences = []tls.CurveID{tls.X25519}
	return &tlsDialer{full: cfg, resume: resume, stats: stats, orphans: map[string][]*setup{}}
}

// config is the configuration for the next connection: X25519 only when a
// session ticket is held (crypto/tls keys its cache by ServerName, which
// ClientTLS sets to the name every manager answers to).
func (d *tlsDialer) config() *tls.Config {
	if c := d.full.ClientSessionCache; c != nil && d.full.ServerName != "" {
		if s, ok := c.Get(d.full.ServerName); ok && s != nil {
			return d.resume
		}
	}
	return d.full
}

// dial is a fasthttp.DialFuncWithTimeout: it returns a connection whose
// TLS handshake is done, waiting at most timeout (0: no bound but
// handshakeLimit).
func (d *tlsDialer) dial(addr string, timeout time.Duration) (net.Conn, error) {
	addr = fasthttp.AddMissingPort(addr, true)
	s := d.adopt(addr)
	if s == nil {
		s = d.start(addr)
	}
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-s.done:
		return s.conn, s.err
	case <-expired:
		d.stats.GivenUp.Add(1)
		d.orphan(addr, s)
		return nil, errSetupTimeout
	}
}

// adopt takes over a set-up to addr whose caller gave up, if any is not
// failed or spent.
func (d *tlsDialer) adopt(addr string) *setup {
	d.mu.Lock()
	defer d.mu.Unlock()
	for l := d.orphans[addr]; len(l) > 0; l = d.orphans[addr] {
		s := l[0]
		d.orphans[addr] = l[1:]
		if len(d.orphans[addr]) == 0 {
			delete(d.orphans, addr)
		}
		select {
		case <-s.done:
			if s.err != nil {
				continue
			}
		default:
		}
		d.stats.TakenOver.Add(1)
		return s
	}
	return nil
}

// orphan keeps s for the next call to addr; a connection nobody takes
// within keptFor of its set-up is closed.
func (d *tlsDialer) orphan(addr string, s *setup) {
	d.mu.Lock()
	d.orphans[addr] = append(d.orphans[addr], s)
	d.mu.Unlock()
	go func() {
		<-s.done
		if s.err != nil {
			d.drop(addr, s)
			return
		}
		t := time.NewTimer(keptFor)
		defer t.Stop()
		<-t.C
		if d.drop(addr, s) {
			d.stats.Dropped.Add(1)
			_ = s.conn.Close()
		}
	}()
}

// drop removes s from addr's orphans; it reports whether s was there.
func (d *tlsDialer) drop(addr string, s *setup) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.orphans[addr]
	for i, o := range l {
		if o == s {
			d.orphans[addr] = append(l[:i:i], l[i+1:]...)
			if len(d.orphans[addr]) == 0 {
				delete(d.orphans, addr)
			}
			return true
		}
	}
	return false
}

// start begins setting up a connection to addr.
func (d *tlsDialer) start(addr string) *setup {
	s := &setup{done: make(chan struct{})}
	cfg := d.config()
	d.stats.Started.Add(1)
	if cfg == d.resume {
		d.stats.Resuming.Add(1)
	}
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	go func() {
		defer close(s.done)
		end := time.Now().Add(handshakeLimit)
		// The turn comes before the dial: a manager waits for a client's
		// hello only so long once it accepted the connection.
		turn, cancel := context.WithDeadline(context.Background(), end)
		release, err := acquireSetup(turn, setupAgent) // LimitSetups
		cancel()
		if err != nil {
			s.err = fmt.Errorf("TLS set-up not started in time: %w", err)
			return
		}
		defer release()
		// The set-up's own time starts with its turn: one that waited
		// long for it and then had the rest of the same 30 s was cut
		// mid-handshake (the managers counted 49,000 handshakes their
		// clients closed in a 10,000-agent join at a machine load of 45).
		end = time.Now().Add(handshakeLimit)
		raw, err := fasthttp.DialTimeout(addr, handshakeLimit)
		if err != nil {
			s.err = err
			return
		}
		c := tls.Client(&callConn{Conn: raw}, cfg) // deadlines armed only in a call
		_ = c.SetDeadline(end)
		if err := c.Handshake(); err != nil {
			_ = raw.Close()
			s.err = err
			return
		}
		_ = c.SetDeadline(time.Time{})
		s.conn = c
	}()
	return s
}
