package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs the CLI in this process and returns its error text.
func runCLI(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		return err.Error()
	}
	t.Fatalf("shoal %s succeeded:\n%s", strings.Join(args, " "), out.String())
	return ""
}

// The mistakes a user makes with TLS get one line naming the fix, without
// saying the same thing twice.
func TestCLITLSMistakes(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler()) // a certificate no CA of the user's signed
	defer srv.Close()

	// https:// without --tls-dir: the manager's certificate cannot be checked.
	got := runCLI(t, "service", "ls", "--addr", srv.URL, "--tls-dir", "")
	if strings.Count(got, "cannot reach the manager") != 1 || !strings.Contains(got, "--tls-dir") ||
		!strings.Contains(got, "certificate signed by unknown authority") {
		t.Errorf("https without --tls-dir: %s", got)
	}

	// A manager's data directory instead of its tls/ subdirectory.
	data := t.TempDir()
	if err := os.MkdirAll(filepath.Join(data, "tls"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "admin.crt", "admin.key"} {
		if err := os.WriteFile(filepath.Join(data, "tls", f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got = runCLI(t, "service", "ls", "--addr", "127.0.0.1:1", "--tls-dir", data)
	if want := "did you mean --tls-dir " + filepath.Join(data, "tls") + "?"; !strings.HasSuffix(got, want) {
		t.Errorf("--tls-dir DATA-DIR:\n got: %s\nwant it to end: %s", got, want)
	}
}
