package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// fakeRoot makes a file system root holding files (path → content).
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const meminfoFile = "MemTotal:       25165824 kB\nMemFree:         1000 kB\n" // 24 GiB

func TestMemoryLimitFlag(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	bare := fakeRoot(t, map[string]string{"proc/meminfo": meminfoFile})
	v2 := fakeRoot(t, map[string]string{"sys/fs/cgroup/memory.max": "4294967296\n", "proc/meminfo": meminfoFile})
	v2none := fakeRoot(t, map[string]string{"sys/fs/cgroup/memory.max": "max\n"})
	v1 := fakeRoot(t, map[string]string{"sys/fs/cgroup/memory/memory.limit_in_bytes": "2147483648\n"})
	v1none := fakeRoot(t, map[string]string{"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"})
	for _, c := range []struct {
		flag, root string
		want       int64
	}{
		{"auto", bare, 0},
		{"", bare, 0},
		{"auto", v2, 4 << 30 * 9 / 10},
		{"auto", v2none, 0},
		{"auto", v1, 2 << 30 * 9 / 10},
		{"auto", v1none, 0},
		{"none", v2, 0},
		{"3GiB", v2, 3 << 30},
		{"512MiB", bare, 512 << 20},
		{"50%", bare, 12 << 30},
		{"100%", bare, 24 << 30},
	} {
		got, err := resolveMemLimit(c.flag, c.root)
		if err != nil || got.bytes != c.want {
			t.Errorf("--memory-limit %q: %d bytes (%v), want %d", c.flag, got.bytes, err, c.want)
		}
	}
}

func TestMemoryLimitFlagRefusals(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	bare := fakeRoot(t, map[string]string{"proc/meminfo": meminfoFile})
	for flag, want := range map[string]string{
		"lots":  "is not a size (e.g. 4GiB, 512MiB), a share of the machine's memory (e.g. 75%), auto or none",
		"-1GiB": "is not a size",
		"0":     "is not a size",
		"10MiB": "is below 64MiB",
		"0%":    "a percentage above 0 and at most 100",
		"150%":  "a percentage above 0 and at most 100",
		"x%":    "a percentage above 0 and at most 100",
	} {
		_, err := resolveMemLimit(flag, bare)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "--memory-limit ") {
			t.Errorf("--memory-limit %q: %v, want an error naming the flag and saying %q", flag, err, want)
		}
	}
	if _, err := resolveMemLimit("75%", t.TempDir()); err == nil || !strings.Contains(err.Error(), "give a size such as 4GiB") {
		t.Errorf("a share without /proc/meminfo: %v", err)
	}
}

// GOMEMLIMIT set by the user wins over auto: the runtime already took it.
func TestMemoryLimitAutoKeepsGOMEMLIMIT(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30) // what the runtime does with the variable at start
	v2 := fakeRoot(t, map[string]string{"sys/fs/cgroup/memory.max": "4294967296\n"})
	got, err := resolveMemLimit("auto", v2)
	if err != nil || got.bytes != 1<<30 || !strings.Contains(got.String(), "GOMEMLIMIT=1GiB") {
		t.Errorf("auto under GOMEMLIMIT=1GiB: %+v (%v), want 1GiB from GOMEMLIMIT", got, err)
	}
	got, _ = resolveMemLimit("2GiB", v2)
	got.apply()
	if n := debug.SetMemoryLimit(-1); n != 2<<30 {
		t.Errorf("--memory-limit 2GiB applied: the runtime's limit is %d", n)
	}
}
