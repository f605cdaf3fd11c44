package api

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A TLS client at a plain-HTTP API (a CLI with --tls-dir against
// `serve --dev`) made fasthttp log its ClientHello: one line of about 4 KB
// of escaped binary. It is logged as one short line saying what happened.
func TestLoggerSaysTLSAtPlainHTTPInOneShortLine(t *testing.T) {
	var lines []string
	l := logger(func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) })
	hello := "\x16\x03\x01\x05\xaa\x01\x00\x05\xa6\x03\x03" + strings.Repeat("\xca\xfe", 700)
	err := errors.New(fmt.Sprintf("error when reading request headers: unsupported http request method %q in %q", hello, hello))
	l.Printf("error when serving connection %q<->%q: %v", "127.0.0.1:7700", "127.0.0.1:41720", err)
	if len(lines) != 1 || len(lines[0]) > 300 || !strings.Contains(lines[0], "127.0.0.1:41720") || !strings.Contains(lines[0], "TLS") {
		t.Fatalf("logged %d line(s), the first %d bytes: %.300q", len(lines), len(lines[0]), lines[0])
	}
	// Other errors are logged as they were.
	lines = nil
	l.Printf("error when serving connection %q<->%q: %v", "a", "b", errors.New("read timeout"))
	if len(lines) != 1 || !strings.HasSuffix(lines[0], "read timeout") {
		t.Fatalf("other errors: %q", lines)
	}
}
