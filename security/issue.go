package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"time"
)

// Role is what a certificate lets its holder do. It is the certificate's OU.
type Role string

// Roles.
const (
	RoleManager Role = "manager" // a manager replica: Raft, and the API as a peer
	RoleWorker  Role = "worker"  // a node's agent: the agent endpoints, for itself only
	RoleAdmin   Role = "admin"   // an operator: the user API, /metrics, /debug/pprof
)

// Default lifetimes of issued certificates.
const (
	DefaultWorkerLifetime  = 90 * 24 * time.Hour
	DefaultManagerLifetime = 365 * 24 * time.Hour
	DefaultAdminLifetime   = 365 * 24 * time.Hour
	// MinLifetime is the shortest lifetime the authority issues (tests and
	// renewal drills use a few seconds).
	MinLifetime = time.Second
)

// Request is a certificate to issue.
type Request struct {
	Role Role
	// Name is the certificate's CN: the node ID of a worker, the replica ID
	// of a manager, "admin" for an admin.
	Name string
	// Key is the holder's public key (from its certificate request).
	Key *ecdsa.PublicKey
	// Hosts are extra DNS names or IP addresses for a manager (its Raft
	// and API hosts); ignored for other roles.
	Hosts []string
	// Lifetime of the certificate; default by role.
	Lifetime time.Duration
}

// Issue signs req, valid from now, and returns the certificate chain in
// DER (leaf first; for a manager, then the managers CA and the root, so a
// joiner can pin the root from the chain a manager presents).
func (ca *CA) Issue(rnd io.Reader, req Request, now time.Time) ([][]byte, error) {
	if req.Key == nil || req.Key.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w: the key must be ECDSA P-256", ErrBadCertRequest)
	}
	if req.Name == "" {
		return nil, fmt.Errorf("%w: no name", ErrBadCertRequest)
	}
	life := req.Lifetime
	if life <= 0 {
		life = map[Role]time.Duration{RoleWorker: DefaultWorkerLifetime, RoleManager: DefaultManagerLifetime,
			RoleAdmin: DefaultAdminLifetime}[req.Role]
	}
	life = max(life, MinLifetime)
	serial, err := newSerial(rnd)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: req.Name, OrganizationalUnit: []string{string(req.Role)}, Organization: []string{ca.ClusterID}},
		// Clocks of peers differ a little: backdate by a minute, or a tenth
		// of a short lifetime.
		NotBefore:   now.Add(-min(time.Minute, life/10)),
		NotAfter:    now.Add(life),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	parent, key := ca.Root, ca.RootKey
	switch req.Role {
	case RoleManager:
		parent, key = ca.Managers, ca.ManagersKey
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.DNSNames = []string{ManagerName, "localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		for _, h := range req.Hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else if h != "" {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	case RoleWorker, RoleAdmin:
	default:
		return nil, fmt.Errorf("%w: unknown role %q", ErrBadCertRequest, req.Role)
	}
	der, err := x509.CreateCertificate(rnd, tmpl, parent, req.Key, key)
	if err != nil {
		return nil, err
	}
	if req.Role == RoleManager {
		return [][]byte{der, ca.Managers.Raw, ca.Root.Raw}, nil
	}
	return [][]byte{der}, nil
}

// NewKey draws a fresh P-256 key.
func NewKey(rnd io.Reader) (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rnd) }

// NewCertRequest returns a PEM certificate request for key: what a joiner
// sends (the manager decides every name in the certificate; the request
// only proves the joiner holds the key).
func NewCertRequest(rnd io.Reader, key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rnd, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "shoal-join"}}, key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// ParseCertRequest decodes a PEM certificate request, checks its signature
// and returns its P-256 public key.
func ParseCertRequest(b []byte) (*ecdsa.PublicKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("%w: no PEM CERTIFICATE REQUEST block", ErrBadCertRequest)
	}
	csr, err := x509.ParseCertificateRequest(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCertRequest, err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("%w: its signature does not verify", ErrBadCertRequest)
	}
	pub, ok := csr.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w: the key must be ECDSA P-256", ErrBadCertRequest)
	}
	return pub, nil
}
