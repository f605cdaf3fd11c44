package cluster

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"shoal/api/client"
	"shoal/internal/freeport"
)

// Config describes the managers to start.
type Config struct {
	Binary       string        // the shoal binary; default os.Executable()
	Managers     int           // replicas; default 3
	DataDir      string        // required: replicas' data go to DataDir/mN
	Groups       int           // service groups; 0: the server's default
	SyncInterval time.Duration // --sync-interval; default 5s
	MinHeartbeat time.Duration // --min-heartbeat; 0: the server's default
	// OrphanTimeout is --orphan-timeout; 0: the server's default.
	OrphanTimeout time.Duration
	RaftLogLevel  string // --raft-log-level; default critical
	// ElectionTimeout is --election-timeout; 0: the server's default.
	ElectionTimeout time.Duration
	// MemoryLimit is --memory-limit; "": the server's default.
	MemoryLimit  string
	Pprof        bool          // start replicas with --pprof
	CheckReplay  bool          // start replicas with --check-replay
	ReadyTimeout time.Duration // default 60s
	// Insecure starts the managers with --insecure (plain HTTP and Raft,
	// no authentication); by default replica 1 creates the cluster CA and
	// the others join with the manager token, as in production.
	Insecure bool
}

// Replica is one manager.
type Replica struct {
	ID   uint64
	API  string // host:port
	Raft string
	Dir  string
	Log  string
	args []string

	mu struct {
		sync.Mutex
		cmd    *exec.Cmd
		exited chan struct{}
		kills  int
	}
}

// Cluster is the managers the loadgen drives.
type Cluster struct {
	cfg      Config
	Replicas []*Replica
	owned    bool // started by us: we may kill and restart them
	// Access is how to reach the managers (the admin credential and the
	// worker token with TLS).
	Access *Access
}

// Start starts cfg.Managers replicas and waits until every one answers
// /v1/status with every group led.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Binary == "" {
		b, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cfg.Binary = b
	}
	if cfg.Managers <= 0 {
		cfg.Managers = 3
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = 5 * time.Second
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 60 * time.Second
	}
	if cfg.DataDir == "" {
		return nil, errors.New("cluster: Config.DataDir is required")
	}
	if err := freshDataDir(cfg.DataDir, cfg.Managers); err != nil {
		return nil, err
	}
	// The ports are found free here and bound by the replicas a moment
	// later; another process can take one in between (an outgoing
	// connection's port, under parallel tests). A start that failed so is
	// made again, afresh, on other ports.
	for attempt := 1; ; attempt++ {
		c, err := startOnce(ctx, cfg)
		switch {
		case err == nil:
			return c, nil
		case c == nil || attempt == startAttempts || ctx.Err() != nil || c.portTaken() == nil:
			return nil, err
		}
		if err := c.setAside(attempt); err != nil {
			return nil, err
		}
	}
}

// freshDataDir refuses a data directory that already holds a replica's
// data: Start makes a new cluster on new ports, and a replica started on
// an earlier cluster's data exits at once (its peers knew it by another
// address), with nothing saying why but its log.
func freshDataDir(dir string, managers int) error {
	for i := 1; i <= managers; i++ {
		d := filepath.Join(dir, fmt.Sprintf("m%d", i))
		if entries, err := os.ReadDir(d); err == nil && len(entries) > 0 {
			return fmt.Errorf("the data directory %s already holds an earlier cluster's replica data (%s); "+
				"a run starts a new cluster: give it a new or empty data directory (nothing was changed)", dir, filepath.Base(d))
		}
	}
	return nil
}

// startAttempts is how many times Start tries when a port it chose was
// taken before its replica bound it.
const startAttempts = 3

// portTaken returns the first replica whose log says its address was
// already in use when it started, nil if none.
func (c *Cluster) portTaken() *Replica {
	for _, r := range c.Replicas {
		if b, err := os.ReadFile(r.Log); err == nil && bytes.Contains(b, []byte("address already in use")) {
			return r
		}
	}
	return nil
}

// logTail is the last lines of a replica's log, to quote in an error
// (the log may be gone by the time someone reads it, as in a test's
// temporary directory).
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return "; it ends: " + strings.Join(lines[max(0, len(lines)-3):], " | ")
}

// setAside moves a failed start's data directories and logs out of the
// way (kept beside them, suffixed with the attempt) so that the next
// attempt starts afresh.
func (c *Cluster) setAside(attempt int) error {
	for _, r := range c.Replicas {
		for _, p := range []string{r.Dir, r.Log} {
			if err := os.Rename(p, fmt.Sprintf("%s.attempt%d", p, attempt)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("cluster: set aside a failed start: %w", err)
			}
		}
	}
	return nil
}

// startOnce starts the replicas on ports found free now; on failure it
// stops them and returns the cluster (its replicas' logs say why) with
// the error.
func startOnce(ctx context.Context, cfg Config) (*Cluster, error) {
	c := &Cluster{cfg: cfg, owned: true}
	var peers []string
	for i := 1; i <= cfg.Managers; i++ {
		api, err := freeport.Addr()
		if err != nil {
			return nil, err
		}
		raft, err := freeport.Addr()
		if err != nil {
			return nil, err
		}
		r := &Replica{ID: uint64(i), API: api, Raft: raft, Dir: filepath.Join(cfg.DataDir, fmt.Sprintf("m%d", i)),
			Log: filepath.Join(cfg.DataDir, fmt.Sprintf("m%d.log", i))}
		c.Replicas = append(c.Replicas, r)
		peers = append(peers, fmt.Sprintf("%d=%s", i, raft))
	}
	for _, r := range c.Replicas {
		r.args = []string{"serve", "--id", fmt.Sprint(r.ID), "--raft-addr", r.Raft, "--api-addr", r.API,
			"--peers", strings.Join(peers, ","), "--data-dir", r.Dir, "--raft-log-level", cmp.Or(cfg.RaftLogLevel, "critical"),
			"--sync-interval", cfg.SyncInterval.String()}
		if cfg.Insecure {
			r.args = append(r.args, "--insecure")
		}
		if cfg.Groups > 0 {
			r.args = append(r.args, "--groups", fmt.Sprint(cfg.Groups))
		}
		if cfg.ElectionTimeout > 0 {
			r.args = append(r.args, "--election-timeout", cfg.ElectionTimeout.String())
		}
		if cfg.MemoryLimit != "" {
			r.args = append(r.args, "--memory-limit", cfg.MemoryLimit)
		}
		if cfg.OrphanTimeout > 0 {
			r.args = append(r.args, "--orphan-timeout", cfg.OrphanTimeout.String())
		}
		if cfg.MinHeartbeat > 0 {
			r.args = append(r.args, "--min-heartbeat", cfg.MinHeartbeat.String())
		}
		if cfg.Pprof {
			r.args = append(r.args, "--pprof")
		}
		if cfg.CheckReplay {
			r.args = append(r.args, "--check-replay")
		}
	}
	rctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()
	if err := c.startAll(rctx); err != nil {
		c.Close()
		return c, err
	}
	if err := c.WaitReady(rctx); err != nil {
		c.Close()
		return c, err
	}
	return c, nil
}

// Join uses the managers at addrs, reached with access; they are never
// killed.
func Join(ctx context.Context, addrs []string, access *Access) (*Cluster, error) {
	c := &Cluster{Access: access}
	for i, a := range addrs {
		b, err := client.BaseURL(strings.TrimSpace(a))
		if err != nil {
			return nil, err
		}
		c.Replicas = append(c.Replicas, &Replica{ID: uint64(i + 1), API: strings.TrimPrefix(strings.TrimPrefix(b, "http://"), "https://")})
	}
	if len(c.Replicas) == 0 {
		return nil, errors.New("cluster: --join needs at least one manager address")
	}
	// Learn the replica IDs from the managers themselves, and the replicas
	// not named (every replica is scraped and compared).
	var managers []client.Manager
	for _, r := range c.Replicas {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := access.Status(sctx, r.API)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("cluster: manager %s: %w", r.API, err)
		}
		r.ID = st.Replica
		managers = append(managers, st.Managers...)
	}
	known := map[uint64]bool{}
	for _, r := range c.Replicas {
		known[r.ID] = true
	}
	for _, m := range managers {
		if !known[m.Replica] && m.API != "" {
			known[m.Replica] = true
			c.Replicas = append(c.Replicas, &Replica{ID: m.Replica, API: m.API})
		}
	}
	return c, nil
}

// Owned reports whether the loadgen started the managers (and may kill
// them).
func (c *Cluster) Owned() bool { return c.owned }

// APIs returns every replica's API address.
func (c *Cluster) APIs() []string {
	var out []string
	for _, r := range c.Replicas {
		out = append(out, r.API)
	}
	return out
}

func (c *Cluster) start(r *Replica) error {
	if err := os.MkdirAll(filepath.Dir(r.Log), 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(r.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.cfg.Binary, r.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = c.cfg.DataDir // never pick up a dragonboat-soft-settings.json from the caller's directory
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("cluster: start replica %d: %w", r.ID, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(exited)
	}()
	r.mu.Lock()
	r.mu.cmd, r.mu.exited = cmd, exited
	r.mu.Unlock()
	return nil
}

// Alive reports whether r's process runs (always true for joined
// managers).
func (r *Replica) Alive() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.exited == nil {
		return r.mu.cmd == nil
	}
	select {
	case <-r.mu.exited:
		return false
	default:
		return true
	}
}

// Kills returns how many times r was killed.
func (r *Replica) Kills() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.kills
}

// Kill sends SIGKILL to r (never the graceful stop) and waits until it is
// gone.
func (c *Cluster) Kill(r *Replica) error {
	if !c.owned {
		return errors.New("cluster: the loadgen did not start this manager; it will not kill it")
	}
	r.mu.Lock()
	cmd, exited := r.mu.cmd, r.mu.exited
	r.mu.kills++
	r.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	_ = cmd.Process.Kill()
	<-exited
	return nil
}

// Restart starts a killed replica again on the same data and addresses.
func (c *Cluster) Restart(r *Replica) error {
	if r.Alive() {
		return nil
	}
	return c.start(r)
}

// WaitReady waits until every live replica answers /v1/status listing
// every manager, with a leader for every group.
func (c *Cluster) WaitReady(ctx context.Context) error {
	var last error
	for {
		ok := true
		for _, r := range c.Replicas {
			if !r.Alive() {
				continue
			}
			st, err := c.status(ctx, r)
			switch {
			case err != nil:
				ok, last = false, fmt.Errorf("replica %d: %w", r.ID, err)
			case len(st.Managers) < len(c.Replicas):
				ok, last = false, fmt.Errorf("replica %d lists %d managers", r.ID, len(st.Managers))
			default:
				for _, g := range st.Groups {
					if g.Leader == 0 {
						ok, last = false, fmt.Errorf("replica %d: group %d has no leader", r.ID, g.Group)
					}
				}
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: managers not ready: %w (last: %v; logs in %s)", ctx.Err(), last, c.cfg.DataDir)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Close stops every replica the loadgen started: SIGTERM, then SIGKILL
// after 10s.
func (c *Cluster) Close() {
	if !c.owned {
		return
	}
	var wg sync.WaitGroup
	for _, r := range c.Replicas {
		r.mu.Lock()
		cmd, exited := r.mu.cmd, r.mu.exited
		r.mu.Unlock()
		if cmd == nil || cmd.Process == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		}()
	}
	wg.Wait()
}

// startAll starts every replica. With TLS, as an operator would: replica 1
// first (it creates the cluster CA and the admin credential in its data
// directory), then the others with --join and the manager token read from
// replica 1 with that credential.
func (c *Cluster) startAll(ctx context.Context) error {
	if c.cfg.Insecure {
		c.Access = &Access{}
		for _, r := range c.Replicas {
			if err := c.start(r); err != nil {
				return err
			}
		}
		return nil
	}
	first := c.Replicas[0]
	if err := c.start(first); err != nil {
		return err
	}
	dir := filepath.Join(first.Dir, "tls")
	var access *Access
	for {
		var err error
		if access, err = AdminAccess(ctx, dir, first.API); err == nil {
			break
		}
		if !first.Alive() {
			return fmt.Errorf("cluster: replica %d exited before it created the cluster CA (log: %s%s)", first.ID, first.Log, logTail(first.Log))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: replica %d did not create the cluster CA: %v (log: %s%s)", first.ID, err, first.Log, logTail(first.Log))
		case <-time.After(100 * time.Millisecond):
		}
	}
	managerToken, err := access.token(ctx, first.API, "manager")
	if err != nil {
		return err
	}
	c.Access = access
	for _, r := range c.Replicas[1:] {
		// On a restart the replica finds its credentials in its data
		// directory and ignores --join.
		r.args = append(r.args, "--join", first.API, "--token", managerToken)
		if err := c.start(r); err != nil {
			return err
		}
	}
	return nil
}
