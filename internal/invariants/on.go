//go:build shoal_invariants

package invariants

// Enabled: this build checks its invariants.
const Enabled = true
