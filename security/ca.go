package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"time"
)

// RootLifetime is how long the cluster's root and managers CA certificates
// are valid: 20 years.
const RootLifetime = 20 * 365 * 24 * time.Hour

// ManagerName is the DNS name every manager certificate carries; clients
// verify managers against it, so any manager address works.
const ManagerName = "shoal-manager"

// Errors of the authority.
var (
	ErrBadCA          = errors.New("security: not a valid Shoal cluster CA")
	ErrBadCertRequest = errors.New("security: the certificate request is not valid")
)

// CA is the cluster's certificate authority: the root and the managers CA,
// with their keys. Every manager holds it.
type CA struct {
	ClusterID   string
	Root        *x509.Certificate
	RootKey     *ecdsa.PrivateKey
	Managers    *x509.Certificate // intermediate: signs manager certificates
	ManagersKey *ecdsa.PrivateKey
}

// Digest is the SHA-256 of a root certificate: it names the cluster in
// join tokens.
type Digest [sha256.Size]byte

func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// DigestOf returns the digest of a DER certificate.
func DigestOf(der []byte) Digest { return sha256.Sum256(der) }

// Digest returns the digest of the CA's root certificate.
func (ca *CA) Digest() Digest { return DigestOf(ca.Root.Raw) }

// NewCA creates a cluster: a fresh cluster ID, a root CA and a managers CA,
// valid from now for RootLifetime. rnd is crypto/rand.Reader outside tests.
func NewCA(rnd io.Reader, now time.Time) (*CA, error) {
	var idb [8]byte
	if _, err := io.ReadFull(rnd, idb[:]); err != nil {
		return nil, err
	}
	ca := &CA{ClusterID: hex.EncodeToString(idb[:])}
	var err error
	if ca.RootKey, err = ecdsa.GenerateKey(elliptic.P256(), rnd); err != nil {
		return nil, err
	}
	if ca.ManagersKey, err = ecdsa.GenerateKey(elliptic.P256(), rnd); err != nil {
		return nil, err
	}
	rootTmpl, err := caTemplate(rnd, ca.ClusterID, "shoal-root-ca", now, 1)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rnd, rootTmpl, rootTmpl, &ca.RootKey.PublicKey, ca.RootKey)
	if err != nil {
		return nil, err
	}
	if ca.Root, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	mgrTmpl, err := caTemplate(rnd, ca.ClusterID, "shoal-managers-ca", now, 0)
	if err != nil {
		return nil, err
	}
	mgrTmpl.MaxPathLenZero = true
	if der, err = x509.CreateCertificate(rnd, mgrTmpl, ca.Root, &ca.ManagersKey.PublicKey, ca.RootKey); err != nil {
		return nil, err
	}
	if ca.Managers, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	return ca, nil
}

func caTemplate(rnd io.Reader, cluster, cn string, now time.Time, pathLen int) (*x509.Certificate, error) {
	serial, err := newSerial(rnd)
	if err != nil {
		return nil, err
	}
	return &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn, Organization: []string{cluster}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(RootLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            pathLen,
	}, nil
}

// newSerial draws a random 128-bit serial number.
func newSerial(rnd io.Reader) (*big.Int, error) {
	var b [16]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return nil, err
	}
	b[0] &= 0x7f
	return new(big.Int).SetBytes(b[:]), nil
}

// check verifies that the CA's parts belong together.
func (ca *CA) check() error {
	switch {
	case ca.Root == nil || ca.Managers == nil || ca.RootKey == nil || ca.ManagersKey == nil:
		return fmt.Errorf("%w: a certificate or key is missing", ErrBadCA)
	case !ca.Root.IsCA || !ca.Managers.IsCA:
		return fmt.Errorf("%w: a CA certificate is not marked as a CA", ErrBadCA)
	case len(ca.Root.Subject.Organization) != 1:
		return fmt.Errorf("%w: the root names no cluster", ErrBadCA)
	case !ca.RootKey.PublicKey.Equal(ca.Root.PublicKey) || !ca.ManagersKey.PublicKey.Equal(ca.Managers.PublicKey):
		return fmt.Errorf("%w: a key does not match its certificate", ErrBadCA)
	}
	if err := ca.Managers.CheckSignatureFrom(ca.Root); err != nil {
		return fmt.Errorf("%w: the managers CA is not signed by the root: %w", ErrBadCA, err)
	}
	ca.ClusterID = ca.Root.Subject.Organization[0]
	return nil
}

// RootPool returns a pool holding only the root: what the API trusts.
func (ca *CA) RootPool() *x509.CertPool { return PoolOf(ca.Root) }

// PoolOf returns a pool of the given certificates.
func PoolOf(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}
