// Package tlsgate bounds how many TLS handshakes a server runs at once.
//
// The one idea: a handshake is a burst of public-key arithmetic, and a
// manager shares its cores between the API and Raft. When a thousand
// agents connect at once (a fleet joining, or moving to a new leader),
// a thousand handshake goroutines become runnable together; Go schedules
// them fairly, so Raft's heartbeats and votes wait behind them for hundreds
// of milliseconds and followers start elections that nothing else called
// for. Behind the gate, connections beyond the limit wait (costing no CPU)
// for a slot, so the handshakes in progress finish quickly and Raft keeps
// its turn.
package tlsgate
