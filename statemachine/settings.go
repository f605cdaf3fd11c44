package statemachine

// Cluster settings are the values an operator tunes that Apply itself
// reads. Every replica of every group must apply the same ones, so they
// are replicated state, never a replica's flag: the cluster group applies
// CmdSetClusterSettings and appends it to its outbox, which carries it to
// every service group (outbox.go); each group applies it at its own entry
// and keeps its values in its snapshots.

// ClusterSettings are the cluster-wide settings Apply reads.
type ClusterSettings struct {
	// TaskHistoryLimit is the most tasks a slot keeps, counting its live
	// task, as SwarmKit counts (`docker swarm update
	// --task-history-limit`): at most TaskHistoryLimit-1 finished tasks
	// remain beside a running one. 1 to MaxTaskHistoryLimit; default
	// DefaultHistoryRetention (5).
	TaskHistoryLimit int
}

// MaxTaskHistoryLimit is the largest task history limit a command may
// set: every finished task kept is memory on every replica.
const MaxTaskHistoryLimit = 100

// Settings returns the cluster settings this group applies.
func (s *State) Settings() ClusterSettings { return s.settings }

// setClusterSettings applies c.Settings: the fields it sets (not 0)
// replace the current values. A lower task history limit trims every slot
// in the same entry (the reactions reap each service's slots), as the
// reaper would at the slot's next change.
func (s *State) setClusterSettings(c *Command) Result {
	n := c.Settings
	if n == nil || *n == (ClusterSettings{}) {
		return reject(CodeInvalid, "no cluster setting to change: give the task history limit")
	}
	if l := n.TaskHistoryLimit; l != 0 && (l < 1 || l > MaxTaskHistoryLimit) {
		return reject(CodeInvalid, "task history limit %d is out of range: give 1 to %d tasks per slot", l, MaxTaskHistoryLimit)
	}
	old := s.settings
	if n.TaskHistoryLimit != 0 {
		s.settings.TaskHistoryLimit = n.TaskHistoryLimit
	}
	if s.settings.TaskHistoryLimit < old.TaskHistoryLimit {
		for _, id := range s.ServiceIDs() {
			s.markDirty(s.services[id])
		}
	}
	return Result{}
}
