//go:build !shoal_seams

package statemachine

func setSeededBug(*Config, mcBug) {}
