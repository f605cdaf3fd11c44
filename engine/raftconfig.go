package engine

import (
	"path/filepath"
	"time"

	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"

	"shoal/engine/raftnet"
)

// nodeHostConfig is the NodeHost's configuration: Shoal's own Raft
// transport, dragonboat's small-memory log DB settings, the engine's
// worker counts.
func (e *Engine) nodeHostConfig() config.NodeHostConfig {
	logdb := config.GetTinyMemLogDBConfig()
	logdb.Shards = e.cfg.LogDBShards
	w := e.cfg.Workers
	return config.NodeHostConfig{
		NodeHostDir:       filepath.Join(e.cfg.DataDir, "raft"),
		RTTMillisecond:    uint64(e.cfg.RTT / time.Millisecond),
		RaftAddress:       e.cfg.RaftAddr,
		RaftEventListener: e.lead,
		MutualTLS:         e.cfg.RaftCAFile != "",
		CAFile:            e.cfg.RaftCAFile,
		CertFile:          e.cfg.RaftCertFile,
		KeyFile:           e.cfg.RaftKeyFile,
		Expert: config.ExpertConfig{
			// Connections that re-dial a peer that restarted, instead of
			// tripping the circuit breaker once per stale stream.
			// What arrives is seen first (receive); the votes this
			// replica gives are noted as they leave (heard.sent). A
			// connection whose peer stops acknowledging is dropped after
			// two election timeouts, not after TCP's back-off.
			TransportFactory: raftnet.Factory{Receive: e.receive,
				Created: func(deliver raftio.MessageHandler) { e.local = deliver },
				Gone:    e.leaderGone, Sent: e.sent,
				DeadAfter: 2 * time.Duration(e.cfg.ElectionRTT) * e.cfg.RTT},
			LogDB: logdb,
			Engine: config.EngineConfig{
				ExecShards: w, CommitShards: w, ApplyShards: w, SnapshotShards: w, CloseShards: w,
			},
		},
	}
}

// raftConfig is one group's Raft configuration: check-quorum and pre-vote
// on, the engine's timers and snapshot cadence.
func (e *Engine) raftConfig(group int) config.Config {
	return config.Config{
		ShardID:            shardID(group),
		ReplicaID:          e.cfg.ReplicaID,
		CheckQuorum:        true,
		PreVote:            true,
		ElectionRTT:        e.cfg.ElectionRTT,
		HeartbeatRTT:       e.cfg.HeartbeatRTT,
		SnapshotEntries:    e.cfg.SnapshotEntries,
		CompactionOverhead: e.cfg.CompactionOverhead,
		MaxInMemLogSize:    e.cfg.MaxInMemLogSize,
		// Snapshots are zstd-compressed by the replica already.
		SnapshotCompressionType: config.NoCompression,
	}
}

// sent is the transport's hook for every batch leaving this replica.
func (e *Engine) sent(b *pb.MessageBatch) {
	e.seen.sent(b)
	if testSent != nil {
		testSent(b)
	}
}

// testSent, when set by a test before its engines start, sees every batch
// any engine of the process sends; it must keep nothing of b.
var testSent func(b *pb.MessageBatch)
