package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// replayDiverged is serve --check-replay's report: one line, and the live
// and the restored state's encodings written to the data directory for
// `cmp` or a decoder.
func replayDiverged(dir string, logf func(string, ...any)) func(group int, index uint64, detail string, live, restored []byte) {
	return func(group int, index uint64, detail string, live, restored []byte) {
		base := filepath.Join(dir, fmt.Sprintf("diverged-g%d-%d", group, index))
		err1 := os.WriteFile(base+".live", live, 0o644)
		err2 := os.WriteFile(base+".restored", restored, 0o644)
		at := -1
		for i := 0; i < min(len(live), len(restored)); i++ {
			if live[i] != restored[i] {
				at = i
				break
			}
		}
		logf("shoal: REPLAY CHECK FAILED: group %d at index %d: the state restored from the last snapshot differs from the live one after the same entries (%s; first differing byte %d of %d/%d); written to %s.{live,restored} (write errors: %v, %v)",
			group, index, detail, at, len(live), len(restored), base, err1, err2)
	}
}
