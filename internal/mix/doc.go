// Package mix holds Shoal's one 64-bit hash mixer, used wherever a decision
// is randomized from data (placement tie-breaks seeded from the service and
// the run's seed, heartbeat jitter from the node ID), so any decision can be
// replayed from its inputs.
//
// The one idea: a pure bijection on uint64 with good avalanche; no global
// state, no randomness source.
package mix

// Mix64 is the SplitMix64 finalizer: a bijection on uint64 with good
// avalanche, so Mix64(seed ^ id) never ties for distinct IDs.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
