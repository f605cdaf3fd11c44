package engine

// Proposed returns how many entries this replica has proposed to group
// since it started, and how many commands they carried: with the other
// replicas' counts, the group's proposal rate and mean batch size.
func (e *Engine) Proposed(group int) (entries, commands uint64) {
	if e.checkGroup(group) != nil || e.props == nil {
		return 0, 0
	}
	p := e.props[group]
	return p.proposed.entries.Load(), p.proposed.commands.Load()
}
