//go:build shoal_seams

package statemachine

func setSeededBug(cfg *Config, on bool) { cfg.seams.reapLive = on }
