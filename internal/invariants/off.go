//go:build !shoal_invariants

package invariants

// Enabled: this build does not check its invariants.
const Enabled = false
