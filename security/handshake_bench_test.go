package security

import (
	"crypto/tls"
	"net"
	"syscall"
	"testing"
	"time"
)

// cpuNow is the CPU time this process used so far (user and system): the
// handshake benchmarks report CPU per handshake, client and server
// together, which a loaded machine stretches far less than wall time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchHandshakes runs b.N mutual-TLS handshakes of a worker with a
// manager over loopback, resuming a session or not, with the key
// exchanges curves (nil: crypto/tls's default, X25519MLKEM768 first).
// With identity the manager's tickets carry the identity (IdentityTickets,
// over connections that keep it) instead of the chain.
func benchHandshakes(b *testing.B, resume bool, curves []tls.CurveID, identity ...bool) {
	ca := newCA(b)
	cert := pair(b, ca, RoleManager, "1")
	srv := ServerTLS(func() *tls.Certificate { return cert }, ca.RootPool())
	if err := ShareTickets(srv, ca); err != nil {
		b.Fatal(err)
	}
	keep := len(identity) > 0 && identity[0]
	if keep {
		if err := IdentityTickets(srv, ca, time.Now); err != nil {
			b.Fatal(err)
		}
	}
	srv.CurvePreferences = curves
	worker := pair(b, ca, RoleWorker, "7")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if keep {
				c = &keeperConn{Conn: c}
			}
			go func() {
				s := tls.Server(c, srv)
				defer s.Close()
				if s.Handshake() == nil {
					_, _ = s.Write([]byte{1})
				}
				_, _ = s.Read(make([]byte, 1))
			}()
		}
	}()
	cli := ClientTLS(ca.RootPool(), func() *tls.Certificate { return worker })
	cli.CurvePreferences = curves
	one := func(cfg *tls.Config) bool {
		a, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		c := tls.Client(a, cfg)
		if err := c.Handshake(); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Read(make([]byte, 1)); err != nil {
			b.Fatal(err)
		}
		r := c.ConnectionState().DidResume
		c.Close()
		return r
	}
	one(cli)
	b.ResetTimer()
	c0 := cpuNow()
	resumed := 0
	for i := 0; i < b.N; i++ {
		cfg := cli
		if !resume {
			cfg = cli.Clone()
			cfg.ClientSessionCache = nil
		}
		if one(cfg) {
			resumed++
		}
	}
	b.ReportMetric(float64((cpuNow()-c0).Microseconds())/float64(b.N), "cpu-µs/handshake")
	b.ReportMetric(float64(resumed)/float64(b.N), "resumed")
}

func BenchmarkHandshakeFull(b *testing.B)            { benchHandshakes(b, false, nil) }
func BenchmarkHandshakeResumed(b *testing.B)         { benchHandshakes(b, true, nil) }
func BenchmarkHandshakeFullIdentity(b *testing.B)    { benchHandshakes(b, false, nil, true) }
func BenchmarkHandshakeResumedIdentity(b *testing.B) { benchHandshakes(b, true, nil, true) }
func BenchmarkHandshakeFullX25519(b *testing.B) {
	benchHandshakes(b, false, []tls.CurveID{tls.X25519})
}
func BenchmarkHandshakeResumedX25519(b *testing.B) {
	benchHandshakes(b, true, []tls.CurveID{tls.X25519})
}
