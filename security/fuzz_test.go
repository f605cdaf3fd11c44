package security

import (
	"strings"
	"testing"
)

// The token and certificate-request parsers take input from anyone who
// reaches a manager: they never panic, and a token they accept formats back
// to the same text.
func FuzzParseToken(f *testing.F) {
	f.Add("SHOAL-1-" + strings.Repeat("ab", 32) + "-" + Secret{1}.Text())
	f.Add("SHOAL-1-")
	f.Add("SHOAL-2-x-y")
	f.Add("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n")
	f.Fuzz(func(t *testing.T, s string) {
		if tok, err := ParseToken(s); err == nil {
			if back, err := ParseToken(tok.String()); err != nil || back != tok {
				t.Fatalf("%q parsed to %v, which does not round-trip: %v", s, tok, err)
			}
		}
		_, _ = ParseCertRequest([]byte(s))
		_, _ = ParseCerts([]byte(s))
		_, _ = ParseKey([]byte(s))
	})
}
