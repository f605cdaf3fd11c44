// Package control holds the manager's side of the agent protocol: the
// decisions a manager makes when an agent talks to it, over the replicated
// groups and nothing else.
//
// The one idea: a protocol is a value function (a request and the groups'
// states in, decisions as data out) plus a short loop that carries the
// decisions out over a narrow interface of the cluster — the few methods of
// the duty.Cluster seam it needs (count the groups, read a group's state
// locally or linearizably, commit a per-group command, name the cluster
// group's leader). It knows no Raft
// engine and no HTTP server: the API decodes a request, checks who sends
// it, calls this package and encodes the answer; the engine, or the
// in-memory duty.Memory in tests, provides the groups.
//
// Contract:
//
//   - The decisions are pure and table-tested without a cluster: PlanSync
//     (which groups a sync visits with which handles, and which handles no
//     group of the cluster made), Next (per group, from what the last
//     step saw, what to do next), StatusCommands, ReportResult and Answer
//     (a status batch's commands, verdicts and re-report mark), and
//     PlanSession (what a session request does to the cluster).
//   - Sync, the sync fan-out (DESIGN.md, "Agent sync"), visits the groups
//     concurrently, one goroutine per group (one after another in group
//     order with AgentsConfig.Sequential), and answers which held
//     handles the agent must destroy. A group whose local replica has
//     applied the agent's sequence and has nothing to confirm answers from
//     that replica and commits nothing; otherwise the sync is committed
//     (CmdNodeSync, fenced by the sequence) and the answer read from the
//     replica that applied it; where nothing was committed (no sequence, or
//     the group refused the sync as invalid or not knowing the node), the
//     answer comes from a linearizable read, so a lagging replica never has
//     an agent destroy tasks it does not know yet.
//   - Any other error of any group is returned (the first in group order)
//     and no answer is given: the agent sends the sync again.
//   - SubmitStatus, status submission: a batch's reports become one
//     CmdTaskStatus each (StatusCommands), submitted together (to a
//     StatusSubmitter as the reports themselves, read one at a time as
//     they are encoded: no command array is made or kept); each
//     outcome maps to the agent's verdict (ReportResult): applied or a
//     lower-rank resend is accepted, a node not ready or an entry past its
//     deadline (CodeExpired) or a command not applied is retried, any
//     other refusal is rejected with the state machine's message. A
//     re-report (the batch's marker) is refused with
//     cluster.ErrNotMonitoring, before anything is submitted, where the
//     node monitor does not run; it marks the node re-reported only when
//     no report of the batch is to be retried (Answer).
//   - Stream, the assignment stream (DESIGN.md, "The task model"),
//     answers each agent's long poll from this replica's state and the
//     Feed: no cursor, a COMPLETE rendered only after a read barrier in
//     every service group (a COMPLETE replaces the agent's whole set and
//     must never be older than what it saw); a cursor the node's journal
//     reaches back to, an INCREMENTAL of the node's changes once there
//     are any; a cursor it does not reach, a COMPLETE marked Resync (a
//     journal begun by a poll reaches back to what the feed had applied
//     then, one begun by an applied entry to the group's index before
//     that entry, whose changes it holds). A poll that parks with a cursor past every entry of its node's journal
//     empties the journal, whose floors rise to the entries dropped (an
//     older cursor then gets the resync). A
//     spec goes to a session once per service and version (the service
//     by ID: one created again under its name starts again at version
//     1); the session's specs are sent again when the agent asks from another cursor than
//     the last answer gave it (that answer was lost, or the agent asked
//     again while its earlier poll was still served: checked as each
//     answer is rendered) or resyncs. A poll
//     with nothing new ends at its wait, at a change of the cluster
//     group's leader to one this replica can name, or at its context's
//     end, with an INCREMENTAL without changes naming the leader; without
//     contact with the cluster group's quorum (CheckQuorum) polls are
//     refused and parked ones end, with no_quorum. A caller done with an
//     INCREMENTAL answer (written, nothing of it kept) hands it back with
//     Release, and the next answers reuse its room; the stream keeps no
//     part of a request or of a frame it answered with (a session copies
//     the cursor it gave).
//   - The Feed is fed by the cluster's apply hook (OnApply) under the
//     group's write lock; the stream reads a node's journal under the
//     group's read lock (Reader.ReadLocal), so it sees the journal
//     complete up to the state it reads. Lock order: group lock → the
//     feed's lock → a journal's lock; polls take only their own node's
//     journal lock, never the feed's. This contract is the package's
//     own: callers only wire OnApply (and Raise after a snapshot).
//   - Agents is the whole protocol of one replica in process: its
//     methods are agent.Manager's (OpenSession, Heartbeat, Assignments,
//     ReportStatus, Sync), so a real agent runs against it without HTTP
//     (the in-process test; the deterministic simulation), and the API's
//     agent endpoints are its translation to HTTP. Its refusals are
//     *wire.Error values; a re-report where the node monitor does not run
//     is answered not_leader naming the leader (unavailable, retry here, on
//     a leader whose monitor is starting); a heartbeat there too, unless
//     the replica has a LeaderLink: then it relays the heartbeat to the
//     leader, batched with others (relay.go), and answers the leader's
//     answer to it; while the leadership moves (no leader known, or the
//     leader stopped answering) it holds the heartbeat for the relay's
//     wait and relays it to the next leader it hears of, falling back to
//     not_leader (unavailable when no leader is known or the leader is
//     only slow) when the relay gets no answer; any other error is
//     the cluster's, which the API maps through its error table.
//   - OpenSession registers a session request's node when its agent
//     opens a session: PlanSession decides from one local read of the cluster
//     group — no hostname: bad request; a node ID this replica neither
//     knows nor saw removed: unavailable, retry (its creation may not be
//     applied here yet); a removed node: node removed; a known node:
//     nothing committed; a new node: a node ID reserved (request ID
//     "node:"+key when the agent sent a key, so a first session asked
//     again finds the node the first attempt made) and the node created
//     once the cluster group applied it, before the service groups learn
//     of it. The refusals are *wire.Error values the API sends as they
//     are. Agents.OpenSession draws the session's ID and records it with
//     the stream; the setup slots stay with the API.
//   - LogBroker (logs.go) carries task output to the users who asked for
//     it, with nothing committed to Raft (docs/logs.md): a subscription is
//     held, in memory, by the manager the user's request reached, with its
//     buffer bounded per subscription and in all (LogConfig; Publish never
//     waits: what does not fit is dropped and counted, and the reader is
//     told); its notice is put on every manager (the API forwards it and
//     renews it; one not renewed for NoticeTTL is forgotten), and each
//     manager's Stream hands it to the nodes it names in the answers to
//     their assignment polls, once per round (a notice also ends a parked
//     poll). A node's
//     lines for a task the subscription does not expect from that node are
//     refused.
//
// Wired in process, as the tests do (a simulation likewise; api.New builds
// it the same way from the engine and the duties manager.Start hands it):
//
//	feed := control.NewFeed(groups, nil, 1<<20, 512)
//	mem.OnApply(feed.OnApply) // duty.Memory's apply hook, or engine.Config.OnApply
//	agents := control.NewAgents(control.AgentsConfig{
//		Cluster: duty.NewSubmitter(mem, nil), // reads, per-group commits, submissions
//		Leaders: leaders, Self: self, // who leads the cluster group; this replica
//		Feed: feed, Monitor: monitor, // the node monitor where it runs (else nil)
//		Clock: clk, SessionIDs: ids, Sequential: true,
//	})
//
// An assignments request with Wait 0 is answered at once (nothing new: an
// INCREMENTAL without changes), so a single-threaded caller never blocks
// on a poll.
package control
