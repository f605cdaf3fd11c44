package security

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// ErrBadPEM: a file is not the PEM data it should be.
var ErrBadPEM = errors.New("security: not valid PEM data")

// CertPEM encodes DER certificates as PEM blocks, in order.
func CertPEM(ders ...[]byte) []byte {
	var out []byte
	for _, d := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d})...)
	}
	return out
}

// KeyPEM encodes an ECDSA private key.
func KeyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// ParseCerts decodes every CERTIFICATE block of b.
func ParseCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadPEM, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no certificate in it", ErrBadPEM)
	}
	return out, nil
}

// ParseKey decodes an EC PRIVATE KEY block.
func ParseKey(b []byte) (*ecdsa.PrivateKey, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, fmt.Errorf("%w: no EC private key in it", ErrBadPEM)
		}
		if blk.Type == "EC PRIVATE KEY" {
			k, err := x509.ParseECPrivateKey(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrBadPEM, err)
			}
			return k, nil
		}
	}
}

// CAFiles is a CA as the PEM contents of its four files.
type CAFiles struct {
	Root, RootKey, Managers, ManagersKey []byte
}

// Files encodes the CA.
func (ca *CA) Files() (CAFiles, error) {
	rk, err := KeyPEM(ca.RootKey)
	if err != nil {
		return CAFiles{}, err
	}
	mk, err := KeyPEM(ca.ManagersKey)
	if err != nil {
		return CAFiles{}, err
	}
	return CAFiles{Root: CertPEM(ca.Root.Raw), RootKey: rk, Managers: CertPEM(ca.Managers.Raw), ManagersKey: mk}, nil
}

// ParseCA decodes a CA from its files and checks that its parts belong
// together.
func ParseCA(f CAFiles) (*CA, error) {
	ca := &CA{}
	for _, part := range []struct {
		name string
		pem  []byte
		cert **x509.Certificate
		key  **ecdsa.PrivateKey
	}{{"root certificate", f.Root, &ca.Root, nil}, {"root key", f.RootKey, nil, &ca.RootKey},
		{"managers CA certificate", f.Managers, &ca.Managers, nil}, {"managers CA key", f.ManagersKey, nil, &ca.ManagersKey}} {
		if part.cert != nil {
			cs, err := ParseCerts(part.pem)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrBadCA, part.name, err)
			}
			*part.cert = cs[0]
			continue
		}
		k, err := ParseKey(part.pem)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadCA, part.name, err)
		}
		*part.key = k
	}
	if err := ca.check(); err != nil {
		return nil, err
	}
	return ca, nil
}

// KeyPair turns a PEM certificate chain and key into a tls.Certificate with
// its leaf parsed.
func KeyPair(certPEM, keyPEM []byte) (tls.Certificate, error) {
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return c, fmt.Errorf("%w: %w", ErrBadPEM, err)
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return c, fmt.Errorf("%w: %w", ErrBadPEM, err)
		}
	}
	return c, nil
}
