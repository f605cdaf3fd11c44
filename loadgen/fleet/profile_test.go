package fleet

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// A child's profile has one file per window of the run: starting the ramp's
// ends the set-up's (a process has one CPU profile at a time), and each
// window's allocations are written as it ends.
func TestProfileWindows(t *testing.T) {
	dir := t.TempDir()
	p := &cpuProfile{pattern: filepath.Join(dir, "agents1.%s.cpu.prof"), allocs: filepath.Join(dir, "agents1.%s.allocs.prof")}
	s := &Service{prof: p}
	if err := p.start("setup"); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"ramp", "rest"} {
		if err := s.Profile(w, new(bool)); err != nil {
			t.Fatalf("window %s: %v", w, err)
		}
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"setup", "ramp", "rest"} {
		for _, kind := range []string{"cpu", "allocs"} {
			b, err := os.ReadFile(filepath.Join(dir, "agents1."+w+"."+kind+".prof"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) { // a profile is gzipped
				t.Errorf("%s %s profile is not a profile: %d bytes", w, kind, len(b))
			}
		}
	}
	// Each window's counts (collector cycles, allocations, TLS set-ups)
	// go beside its allocations.
	for _, w := range []string{"setup", "ramp", "rest"} {
		b, err := os.ReadFile(filepath.Join(dir, "agents1."+w+".counts.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("gc-cycles ")) || !bytes.Contains(b, []byte("dials-started ")) {
			t.Errorf("%s counts: %q", w, b)
		}
	}
	// A child that profiles nothing takes the call and writes nothing.
	none := &Service{prof: &cpuProfile{}}
	if err := none.Profile("ramp", new(bool)); err != nil {
		t.Fatal(err)
	}
}
