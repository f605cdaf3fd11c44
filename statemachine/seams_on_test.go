//go:build shoal_seams

package statemachine

func setSeededBug(cfg *Config, bug mcBug) {
	cfg.seams.reapLive = bug == mcBugReapLive
	cfg.seams.neverDown = bug == mcBugNeverDown
	cfg.seams.replaceGlobalAside = bug == mcBugReplaceGlobalAside
	cfg.seams.decideEarly = bug == mcBugDecideEarly
	cfg.seams.unknownPending = bug == mcBugUnknownPending
}
