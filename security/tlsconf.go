package security

import (
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// ErrManagerNotPinned: the manager a joiner reached does not present a
// certificate of the cluster its token names.
var ErrManagerNotPinned = errors.New("the manager's CA does not match the join token's CA digest: " +
	"it belongs to another cluster, or something between you and it is not the manager; nothing was sent")

// ServerTLS is a manager API's TLS configuration: it presents the
// certificate cert returns (a renewal takes effect on new connections) and
// verifies client certificates against roots when given. Whether a request
// needs one, and which role, the API decides per endpoint.
func ServerTLS(cert func() *tls.Certificate, roots *x509.CertPool) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.VerifyClientCertIfGiven,
		ClientCAs:  roots,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := cert(); c != nil {
				return c, nil
			}
			return nil, errors.New("no server certificate")
		},
	}
}

// ClientTLS is the configuration of a client of the managers (an agent, the
// CLI, another manager): it trusts roots and accepts any manager of the
// cluster whatever address it was reached at (manager certificates carry
// ManagerName), and presents the certificate cert returns (nil: none).
func ClientTLS(roots *x509.CertPool, cert func() *tls.Certificate) *tls.Config {
	// Every manager answers to ManagerName and shares the cluster's ticket
	// key (ShareTickets), so a session ticket of one manager resumes at
	// any other: a client moving to a new leader skips the signatures.
	c := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: roots, ServerName: ManagerName,
		ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	if cert != nil {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if k := cert(); k != nil {
				return k, nil
			}
			return &tls.Certificate{}, nil
		}
	}
	return c
}

// PinnedTLS is a joiner's configuration: it holds no CA yet, so it accepts
// a manager only if the chain the manager presents ends in a root whose
// digest is pin, and the leaf is a manager certificate under that root.
func PinnedTLS(pin Digest) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The standard verification needs roots we do not have yet;
		// VerifyPeerCertificate does it against the pinned root instead.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			_, err := VerifyPinned(raw, pin)
			return err
		},
	}
}

// VerifyPinned checks a presented chain (leaf first, root last) against a
// pinned root digest, and returns the root.
func VerifyPinned(raw [][]byte, pin Digest) (*x509.Certificate, error) {
	if len(raw) < 2 || DigestOf(raw[len(raw)-1]) != pin {
		return nil, ErrManagerNotPinned
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, r := range raw {
		c, err := x509.ParseCertificate(r)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrManagerNotPinned, err)
		}
		certs[i] = c
	}
	root := certs[len(certs)-1]
	inter := x509.NewCertPool()
	for _, c := range certs[1 : len(certs)-1] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: PoolOf(root), Intermediates: inter, DNSName: ManagerName,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrManagerNotPinned, err)
	}
	return root, nil
}

// ShareTickets makes cfg, a manager's server configuration, encrypt session
// tickets with a key every manager of the cluster derives from the root
// key, so each resumes the sessions the others began. When a leader dies,
// its agents' reconnections to the next one are resumptions (an ECDHE
// exchange, no certificate signature or chain verification) instead of a
// thousand full handshakes at once. Resumed TLS 1.3 sessions still run
// ECDHE, so the key exposes no traffic; and whoever holds the root key can
// mint certificates anyway. A resumed client certificate that expired is
// not accepted (crypto/tls checks it).
func ShareTickets(cfg *tls.Config, ca *CA) error {
	k, err := ticketKey(ca, "shoal manager session tickets v1")
	if err != nil {
		return err
	}
	cfg.SetSessionTicketKeys([][32]byte{k})
	return nil
}

// ticketKey derives the session ticket key named label from the cluster's
// root key.
func ticketKey(ca *CA, label string) ([32]byte, error) {
	if ca == nil || ca.RootKey == nil {
		return [32]byte{}, errors.New("sharing session tickets needs the cluster's root key")
	}
	der, err := x509.MarshalECPrivateKey(ca.RootKey)
	if err != nil {
		return [32]byte{}, fmt.Errorf("reading the root key: %w", err)
	}
	k, err := hkdf.Key(sha256.New, der, []byte(ca.ClusterID), label, 32)
	if err != nil {
		return [32]byte{}, err
	}
	return [32]byte(k), nil
}
