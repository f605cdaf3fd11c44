package mix

import "testing"

func TestMix64KnownValues(t *testing.T) {
	// SplitMix64's finalizer maps 0 to 0 and is a bijection: distinct small
	// inputs give distinct outputs.
	if Mix64(0) != 0 {
		t.Fatalf("Mix64(0) = %#x", Mix64(0))
	}
	seen := map[uint64]bool{}
	for i := range uint64(1 << 12) {
		v := Mix64(i)
		if seen[v] {
			t.Fatalf("Mix64 collides at %d", i)
		}
		seen[v] = true
	}
}
