package agent

import (
	"errors"
	"hash/fnv"
	"log/slog"
	"time"

	"shoal/internal/clock"
	"shoal/wire"
)

// Config is what an agent runs with.
type Config struct {
	Manager  Manager  // required: the managers (api/client.AgentClient)
	Executor Executor // required: ProcessExecutor, or SimExecutor in the loadgen
	Store    Store    // required: PebbleStore, or MemStore
	// Node describes this node to the managers.
	Node wire.NodeDescription
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Seed seeds every jitter and backoff draw; 0 derives one from the
	// hostname and the clock. The loadgen sets it so a run replays.
	Seed uint64
	// PollWait is how long one assignments long-poll may wait; default 30s.
	PollWait time.Duration
	// MaxBatch is the most status reports in one batch; default 1024.
	MaxBatch int
	// UrgentDelay is how soon after the last status batch a state change
	// goes out; default 200ms.
	UrgentDelay time.Duration
	// RoutineInterval is how soon after the last status batch any other
	// owed status goes out, and how long to wait after a failed send;
	// default 1s.
	RoutineInterval time.Duration
	// InitialPeriod is the heartbeat period assumed before any manager has
	// told one (the floor of the first backoff); default 5s.
	InitialPeriod time.Duration
	// MaxBackoff caps the reconnect backoff; default 2m.
	MaxBackoff time.Duration
	// DefaultSyncInterval is used when the session gives no sync interval;
	// default 1m.
	DefaultSyncInterval time.Duration
	// CallTimeout bounds one call to a manager (a long-poll: its wait plus
	// this; a heartbeat: at most one period); default 30s. It is a transport
	// deadline on the real clock.
	CallTimeout time.Duration
	// StopOnExit makes Run stop every task process (SIGTERM, then SIGKILL
	// after the stop grace) before it returns, as `serve --dev` wants.
	// Default false: processes outlive the agent, and the next agent on the
	// same data directory re-attaches to them.
	StopOnExit bool
}

func (c Config) withDefaults() (Config, error) {
	if c.Manager == nil || c.Executor == nil || c.Store == nil {
		return c, errors.New("agent: Config needs a Manager, an Executor and a Store")
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Seed == 0 {
		h := fnv.New64a()
		h.Write([]byte(c.Node.Hostname))
		c.Seed = h.Sum64() ^ uint64(c.Clock.Now().UnixNano())
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.PollWait, 30*time.Second)
	def(&c.UrgentDelay, 200*time.Millisecond)
	def(&c.RoutineInterval, time.Second)
	def(&c.InitialPeriod, 5*time.Second)
	def(&c.MaxBackoff, 2*time.Minute)
	def(&c.DefaultSyncInterval, time.Minute)
	def(&c.CallTimeout, 30*time.Second)
	if c.MaxBatch <= 0 {
		c.MaxBatch = 1024
	}
	return c, nil
}
