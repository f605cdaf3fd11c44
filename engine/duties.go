package engine

import (
	"context"

	"shoal/engine/duty"
	"shoal/statemachine"
)

// The leader duties live in shoal/engine/duty, over its narrow Cluster
// interface; this file hands them the engine. The names below keep the
// duties' entry points where callers found them:
//
//	sig := engine.NewSignal()              // cfg.OnApply = sig.OnApply before Open
//	d := engine.NewDriver(e, engine.DriverConfig{Signal: sig})
//	m, err := engine.NewMonitorDuty(e, engine.MonitorConfig{})
//	tm := engine.NewTimerDuty(e, engine.TimerConfig{})
//	ob := engine.NewOutboxDuty(e, engine.OutboxConfig{Signal: obSig}) // obSig := engine.NewOutboxSignal(), its OnApply in cfg.OnApply
//	e.AddDuty(d); e.AddDuty(m); e.AddDuty(tm); e.AddDuty(ob)
//
// A duty's Clock defaults to the engine's clock.

// Cluster returns the engine as the duties see it (shoal/engine/duty's
// Cluster), for callers that build duties themselves.
func (e *Engine) Cluster() duty.Cluster { return cluster{e} }

// cluster adapts *Engine to duty.Cluster.
type cluster struct{ e *Engine }

func (c cluster) Groups() int { return c.e.Groups() }

func (c cluster) Read(ctx context.Context, group int, fn func(*statemachine.State)) error {
	return c.e.Read(ctx, group, fn)
}

func (c cluster) ReadLocal(group int, fn func(*statemachine.State)) error {
	return c.e.ReadLocal(group, fn)
}

func (c cluster) SubmitMany(ctx context.Context, cmds []statemachine.Command) []duty.Outcome {
	outs := c.e.SubmitMany(ctx, cmds)
	res := make([]duty.Outcome, len(outs))
	for i, o := range outs {
		res[i] = duty.Outcome{Result: o.Result, Failed: o.Failed}
	}
	return res
}

func (c cluster) SubmitToGroup(ctx context.Context, group int, cmd statemachine.Command) (statemachine.Result, error) {
	return c.e.SubmitToGroup(ctx, group, cmd)
}

// Scheduler driver (see duty.Driver).
type (
	Driver        = duty.Driver
	DriverConfig  = duty.DriverConfig
	RunStats      = duty.RunStats
	Unschedulable = duty.Unschedulable
	Signal        = duty.Signal
)

// NewSignal returns a signal with no wake-up pending; wire its OnApply
// into Config.OnApply and pass it in DriverConfig.Signal.
func NewSignal() *Signal { return duty.NewSignal() }

// NewDriver returns the scheduler driver for e; register it with e.AddDuty.
func NewDriver(e *Engine, cfg DriverConfig) *Driver {
	if cfg.Clock == nil {
		cfg.Clock = e.cfg.Clock
	}
	return duty.NewDriver(cluster{e}, cfg)
}

// Node monitor duty (see duty.MonitorDuty).
type (
	MonitorDuty   = duty.MonitorDuty
	MonitorConfig = duty.MonitorConfig
)

// NewMonitorDuty returns the node monitor duty for e; register it with
// e.AddDuty. It fails only on a bad monitor configuration.
func NewMonitorDuty(e *Engine, cfg MonitorConfig) (*MonitorDuty, error) {
	if cfg.Clock == nil {
		cfg.Clock = e.cfg.Clock
	}
	return duty.NewMonitorDuty(cluster{e}, cfg)
}

// Timer duty (see duty.TimerDuty).
type (
	TimerDuty   = duty.TimerDuty
	TimerConfig = duty.TimerConfig
)

// NewTimerDuty returns the timer duty for e; register it with e.AddDuty.
func NewTimerDuty(e *Engine, cfg TimerConfig) *TimerDuty {
	if cfg.Clock == nil {
		cfg.Clock = e.cfg.Clock
	}
	return duty.NewTimerDuty(cluster{e}, cfg)
}

// Outbox duty (see duty.OutboxDuty).
type (
	OutboxDuty   = duty.OutboxDuty
	OutboxConfig = duty.OutboxConfig
)

// NewOutboxSignal returns a signal for OutboxConfig.Signal; wire its
// OnApply into Config.OnApply.
func NewOutboxSignal() *Signal { return duty.NewOutboxSignal() }

// NewOutboxDuty returns the outbox duty for e (the cross-group re-drive of
// node, network and lease changes); register it with e.AddDuty.
func NewOutboxDuty(e *Engine, cfg OutboxConfig) *OutboxDuty {
	if cfg.Clock == nil {
		cfg.Clock = e.cfg.Clock
	}
	return duty.NewOutboxDuty(cluster{e}, cfg)
}

var (
	_ Duty = (*OutboxDuty)(nil)
	_ Duty = (*Driver)(nil)
	_ Duty = (*MonitorDuty)(nil)
	_ Duty = (*TimerDuty)(nil)
)
