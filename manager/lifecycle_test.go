package manager

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// serveOnce runs Serve on dir until it says it is ready, then stops it,
// and returns every line it said.
func serveOnce(t *testing.T, dir string, insecure bool) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var lines []string
	o := ServeOptions{Options: Options{DataDir: dir, APIAddr: freeAddr(t)}, Insecure: insecure,
		Say: func(line string) {
			mu.Lock()
			lines = append(lines, line)
			mu.Unlock()
			if strings.HasPrefix(line, "ready: ") {
				cancel()
			}
		}}
	if err := Serve(ctx, o); err != nil {
		t.Fatalf("serve: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return lines
}

func sayLines(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// The serve lifecycle of a first replica with TLS: it creates the cluster
// CA once, serves HTTPS, becomes ready, and at stop reports every group's
// last index and hash; a restart reads the TLS material it wrote.
func TestServeCreatesTheCAOnceAndReportsTheStop(t *testing.T) {
	dir := t.TempDir()
	for start := 1; start <= 2; start++ {
		lines := serveOnce(t, dir, false)
		all := strings.Join(lines, "\n")
		wantCA := 0
		if start == 1 {
			wantCA = 1
		}
		if n := sayLines(lines, "TLS: created the cluster CA in "); n != wantCA {
			t.Errorf("start %d: %d CA lines, want %d:\n%s", start, n, wantCA, all)
		}
		for _, p := range []string{"serving replica=1 ", "TLS on: mutual TLS", "ready: every group has a leader; API at https://", "stopped replica=1 g0="} {
			if sayLines(lines, p) != 1 {
				t.Errorf("start %d: no line %q:\n%s", start, p, all)
			}
		}
		if last := lines[len(lines)-1]; !strings.HasPrefix(last, "stopped replica=1 g0=") {
			t.Errorf("start %d: last line %q, want the stop line", start, last)
		}
	}
	// A directory created with TLS refuses to start without it.
	err := Serve(context.Background(), ServeOptions{Options: Options{DataDir: dir, APIAddr: freeAddr(t)}, Insecure: true})
	if err == nil || !strings.Contains(err.Error(), "was created with TLS; start it without --insecure") {
		t.Fatalf("insecure start of a TLS directory: %v", err)
	}
}
