package meminfo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseReadsMemTotalInKiB(t *testing.T) {
	in := "MemFree:         1000 kB\nMemTotal:       24576000 kB\nBuffers: 1 kB\n"
	got, err := Parse(strings.NewReader(in))
	if err != nil || got != 24576000<<10 {
		t.Fatalf("Parse = %d, %v; want %d", got, err, int64(24576000)<<10)
	}
}

func TestParseSaysWhatIsWrong(t *testing.T) {
	for in, want := range map[string]string{
		"MemFree: 1 kB\n":     "no MemTotal line",
		"MemTotal: lots kB\n": `MemTotal "lots" is not a number of KiB`,
		"MemTotal: -4 kB\n":   `MemTotal "-4" is not a number of KiB`,
	} {
		if _, err := Parse(strings.NewReader(in)); err == nil || err.Error() != want {
			t.Errorf("Parse(%q) error = %v; want %q", in, err, want)
		}
	}
}

func TestTotalReadsUnderRoot(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc", "meminfo"), []byte("MemTotal: 2048 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := Total(root); err != nil || got != 2<<20 {
		t.Fatalf("Total = %d, %v; want %d", got, err, 2<<20)
	}
	if _, err := Total(filepath.Join(root, "missing")); err == nil {
		t.Fatal("Total of a root without /proc/meminfo gave no error")
	}
}
