package loadgen

import (
	"strings"
	"testing"
	"time"
)

// The managers' transport is chosen once and consistently: TLS by default,
// --insecure for plain HTTP, and --tls-dir only to drive --join managers
// with TLS; a run that could not reach its managers is refused up front
// with the flag to fix.
func TestConfigTransport(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string // "" : accepted
	}{
		{"started, TLS", Config{}, ""},
		{"started, insecure", Config{Insecure: true}, ""},
		{"join with TLS needs the admin credential", Config{Join: []string{"127.0.0.1:7700"}}, "give --tls-dir"},
		{"join with TLS", Config{Join: []string{"127.0.0.1:7700"}, TLSDir: "d/tls"}, ""},
		{"join insecure", Config{Join: []string{"127.0.0.1:7700"}, Insecure: true}, ""},
		{"tls-dir without join", Config{TLSDir: "d/tls"}, "--tls-dir is for --join"},
		{"tls-dir and insecure", Config{Join: []string{"127.0.0.1:7700"}, TLSDir: "d/tls", Insecure: true}, "exclude each other"},
	} {
		_, err := c.cfg.withDefaults()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// The managers' default sync interval keeps the fleet's aggregate sync
// rate, not the interval: 5 s up to a thousand agents, 5 ms per agent
// beyond; an interval given is kept.
// From 5,000 agents on, the managers the loadgen starts get a 2s election
// timeout unless one is given; smaller fleets and joined clusters keep the
// server's.
func TestConfigElectionTimeoutForBigFleets(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want time.Duration
	}{
		{Config{Agents: 1000}, 0},
		{Config{Agents: 5000}, 2 * time.Second},
		{Config{Agents: 10000, ElectionTimeout: time.Second}, time.Second},
		{Config{Agents: 10000, Join: []string{"127.0.0.1:7700"}, Insecure: true}, 0},
	} {
		got, err := c.cfg.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if got.ElectionTimeout != c.want {
			t.Errorf("%d agents, --election-timeout %v, join %v: %v, want %v", c.cfg.Agents, c.cfg.ElectionTimeout, c.cfg.Join, got.ElectionTimeout, c.want)
		}
	}
}

func TestConfigSyncIntervalScalesWithAgents(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want time.Duration
	}{
		{Config{}, 5 * time.Second},
		{Config{Agents: 1000}, 5 * time.Second},
		{Config{Agents: 10000}, 50 * time.Second},
		{Config{Agents: 10000, SyncInterval: 7 * time.Second}, 7 * time.Second},
	} {
		got, err := c.cfg.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if got.SyncInterval != c.want {
			t.Errorf("%d agents, --sync-interval %v: %v, want %v", c.cfg.Agents, c.cfg.SyncInterval, got.SyncInterval, c.want)
		}
	}
}
