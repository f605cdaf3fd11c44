package tlsdir

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"shoal/security"
)

// File names in a TLS directory.
const (
	RootCert     = "ca.crt"
	RootKey      = "ca.key"
	ManagersCert = "managers-ca.crt"
	ManagersKey  = "managers-ca.key"
	Tokens       = "tokens"
	Node         = "node"  // node.crt, node.key
	Admin        = "admin" // admin.crt, admin.key
)

// Dir is a TLS directory.
type Dir string

// Path returns the path of a file in d.
func (d Dir) Path(name string) string { return filepath.Join(string(d), name) }

// Has reports whether every named file exists.
func (d Dir) Has(names ...string) bool {
	for _, n := range names {
		if _, err := os.Stat(d.Path(n)); err != nil {
			return false
		}
	}
	return true
}

// HasPair reports whether the certificate and key of pair exist.
func (d Dir) HasPair(pair string) bool { return d.Has(pair+".crt", pair+".key") }

// write replaces name atomically; secret files get mode 0600.
func (d Dir) write(name string, b []byte, secret bool) error {
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if secret {
		mode = 0o600
	}
	tmp := d.Path("." + name + ".tmp")
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	return os.Rename(tmp, d.Path(name))
}

func (d Dir) read(name string) ([]byte, error) {
	b, err := os.ReadFile(d.Path(name))
	if err != nil {
		return nil, fmt.Errorf("TLS directory %s: %w", d, err)
	}
	return b, nil
}

// WriteCA stores the whole CA (a manager's).
func (d Dir) WriteCA(f security.CAFiles) error {
	for _, p := range []struct {
		name   string
		b      []byte
		secret bool
	}{{RootCert, f.Root, false}, {RootKey, f.RootKey, true}, {ManagersCert, f.Managers, false}, {ManagersKey, f.ManagersKey, true}} {
		if err := d.write(p.name, p.b, p.secret); err != nil {
			return err
		}
	}
	return nil
}

// CA reads the whole CA.
func (d Dir) CA() (*security.CA, error) {
	var f security.CAFiles
	for _, p := range []struct {
		name string
		dst  *[]byte
	}{{RootCert, &f.Root}, {RootKey, &f.RootKey}, {ManagersCert, &f.Managers}, {ManagersKey, &f.ManagersKey}} {
		b, err := d.read(p.name)
		if err != nil {
			return nil, err
		}
		*p.dst = b
	}
	ca, err := security.ParseCA(f)
	if err != nil {
		return nil, fmt.Errorf("TLS directory %s: %w", d, err)
	}
	return ca, nil
}

// Root reads the cluster root certificate.
func (d Dir) Root() (*x509.Certificate, error) {
	b, err := d.read(RootCert)
	if err != nil {
		return nil, err
	}
	cs, err := security.ParseCerts(b)
	if err != nil {
		return nil, fmt.Errorf("TLS directory %s: %s: %w", d, RootCert, err)
	}
	return cs[0], nil
}

// WriteRoot stores the cluster root certificate.
func (d Dir) WriteRoot(certPEM []byte) error { return d.write(RootCert, certPEM, false) }

// WritePair stores a certificate chain and its key.
func (d Dir) WritePair(pair string, certPEM, keyPEM []byte) error {
	if err := d.write(pair+".key", keyPEM, true); err != nil {
		return err
	}
	return d.write(pair+".crt", certPEM, false)
}

// WritePairKey stores a certificate chain and its ECDSA key.
func (d Dir) WritePairKey(pair string, certPEM []byte, key *ecdsa.PrivateKey) error {
	kp, err := security.KeyPEM(key)
	if err != nil {
		return err
	}
	return d.WritePair(pair, certPEM, kp)
}

// Pair reads a certificate chain and its key.
func (d Dir) Pair(pair string) (tls.Certificate, error) {
	c, err := d.read(pair + ".crt")
	if err != nil {
		return tls.Certificate{}, err
	}
	k, err := d.read(pair + ".key")
	if err != nil {
		return tls.Certificate{}, err
	}
	kp, err := security.KeyPair(c, k)
	if err != nil {
		return kp, fmt.Errorf("TLS directory %s: %s: %w", d, pair, err)
	}
	return kp, nil
}

// TokenFile is a manager's join secrets, kept in d/tokens.
type TokenFile struct {
	dir Dir
	mu  sync.Mutex
	cur security.Secrets
}

type tokenDoc struct {
	Worker  string `json:"worker"`
	Manager string `json:"manager"`
}

// OpenTokens reads d/tokens.
func (d Dir) OpenTokens() (*TokenFile, error) {
	b, err := d.read(Tokens)
	if err != nil {
		return nil, err
	}
	var doc tokenDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("TLS directory %s: %s is not valid", d, Tokens)
	}
	w, err1 := security.ParseSecret(doc.Worker)
	m, err2 := security.ParseSecret(doc.Manager)
	if errors.Join(err1, err2) != nil {
		return nil, fmt.Errorf("TLS directory %s: %s holds a malformed secret", d, Tokens)
	}
	return &TokenFile{dir: d, cur: security.Secrets{Worker: w, Manager: m}}, nil
}

// CreateTokens writes the first secrets and opens them.
func (d Dir) CreateTokens(s security.Secrets) (*TokenFile, error) {
	t := &TokenFile{dir: d}
	return t, t.Set(s)
}

// Secrets returns the current secrets.
func (t *TokenFile) Secrets() security.Secrets {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur
}

// Set replaces the secrets, on disk first.
func (t *TokenFile) Set(s security.Secrets) error {
	b, err := json.Marshal(tokenDoc{Worker: s.Worker.Text(), Manager: s.Manager.Text()})
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.dir.write(Tokens, append(b, '\n'), true); err != nil {
		return err
	}
	t.cur = s
	return nil
}

// AdminCredential reads the cluster root and the admin key pair (ca.crt,
// admin.crt, admin.key: a manager's DATA-DIR/tls, or a copy of it), with an
// error that says which files are wanted.
func (d Dir) AdminCredential() (*x509.Certificate, tls.Certificate, error) {
	const want = "want ca.crt, admin.crt and admin.key, as in a manager's DATA-DIR/tls"
	root, err := d.Root()
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("%w (%s)", err, want)
	}
	cert, err := d.Pair(Admin)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("%w (%s)", err, want)
	}
	return root, cert, nil
}
