// Package raftnet carries Raft messages and snapshot chunks between
// replicas over TCP, with mutual TLS when the replica has Raft
// certificates: the transport dragonboat's NodeHost uses
// (config.ExpertConfig.TransportFactory).
//
// The one idea: a connection notices at once that its peer went away and
// dials again before its next send. Dragonboat keeps several long-lived
// stream connections to each peer and finds a dead one only when a write
// fails; every such failure trips its per-peer circuit breaker (half a
// second to a second of backoff, during which nothing reaches the peer).
// Two followers send each other nothing while a leader is alive, so after
// one of them restarted the other's connections to it were all dead
// without anyone knowing: when the leader then died, each vote request hit
// another dead connection and tripped the breaker again, and groups stayed
// leaderless for 3-4 seconds. Here every outgoing connection has a watcher
// that reads it (the receiver never writes on a message connection, so a
// read returns only when the peer closed or reset it); a send on a
// connection the watcher saw close dials a fresh one first, and a send
// whose write fails is tried once more on a fresh connection; when that
// write fails too, the connection is closed (a frame may be half written)
// and the next send dials.
//
// A path that goes down without a reset (a host that vanished, a network
// partition that silently drops packets) is ended by the kernel within
// Factory.DeadAfter, which the engine sets to two election timeouts:
// every connection, dialled or accepted, for messages or snapshots, has
// TCP_USER_TIMEOUT and TCP keep-alives set from it. Data sent and not
// acknowledged for DeadAfter (a leader sends heartbeats every few RTTs,
// so its connection to a cut-off follower always has some), or, on a
// connection with nothing in flight, keep-alive probes unanswered for
// about DeadAfter, end the connection: the watcher's read and any write
// fail, and the next send dials. Without this the connection stays open
// through the cut while TCP's retransmission timer backs off to tens of
// seconds, and traffic resumes only at its next retransmission after the
// path healed. A dial that has not connected (TLS handshake and preamble
// included) within DeadAfter fails too, so the tries made during a cut end
// soon and one made after the heal goes through. DeadAfter must stay
// longer than any wait a healthy peer imposes: on Linux a receive window
// kept shut for DeadAfter also ends a connection, so a receiver that
// stopped reading that long would lose it (its messages are then lost
// and resent, as after any failure). Outside Linux only the keep-alives
// apply: a connection with data in flight ends only when a write blocks
// past its deadline or TCP itself gives up.
// A snapshot whose chunk cannot be sent has failed: its connection is
// closed without the end frame.
//
// A peer whose host refuses the connection (nothing listens: the process
// is restarting) loses the messages sent meanwhile without an error, and
// the connection dials again on a later send: an error would trip the
// breaker, which then shuts the peer out for up to a second after it is
// back, long enough to stall a group whose quorum needs it during a
// rolling restart. A peer that does not answer at all (a host or network
// down) still fails the dial, after DeadAfter, and dragonboat's breaker
// and unreachable reports work as before. The first refusal after a peer was reachable is
// reported (Factory.Gone): the engine starts an election at once in the
// groups that peer led.
//
// The wire format is Shoal's own (all replicas of a cluster run one
// version): a connection starts with an 8-byte preamble (magic, version,
// kind: messages or snapshot chunks), then frames of a 4-byte length, a
// 4-byte CRC-32C of the payload and the payload (a marshalled
// raftpb.MessageBatch or raftpb.Chunk). A batch dragonboat hands over is
// sent as several such frames of at most about 1 MiB of messages each, in
// order (a single bigger message goes alone), and each arrives as a batch
// of its own; in a batch that needs several frames, the control messages
// (heartbeats, votes, answers) go first. A snapshot connection ends with an
// empty frame, which the receiver acknowledges with one byte after it
// handled every chunk before it.
package raftnet
