package loadgen

import (
	"strings"
	"testing"
)

// The managers' transport is chosen once and consistently: TLS by default,
// --insecure for plain HTTP, and --tls-dir only to drive --join managers
// with TLS; a run that could not reach its managers is refused up front
// with the flag to fix.
func TestConfigTransport(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string // "" : accepted
	}{
		{"started, TLS", Config{}, ""},
		{"started, insecure", Config{Insecure: true}, ""},
		{"join with TLS needs the admin credential", Config{Join: []string{"127.0.0.1:7700"}}, "give --tls-dir"},
		{"join with TLS", Config{Join: []string{"127.0.0.1:7700"}, TLSDir: "d/tls"}, ""},
		{"join insecure", Config{Join: []string{"127.0.0.1:7700"}, Insecure: true}, ""},
		{"tls-dir without join", Config{TLSDir: "d/tls"}, "--tls-dir is for --join"},
		{"tls-dir and insecure", Config{Join: []string{"127.0.0.1:7700"}, TLSDir: "d/tls", Insecure: true}, "exclude each other"},
	} {
		_, err := c.cfg.withDefaults()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want an error saying %q", c.name, err, c.want)
		}
	}
}
