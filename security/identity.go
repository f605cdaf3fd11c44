package security

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrNoIdentity: a peer certificate does not name a Shoal identity of this
// cluster.
var ErrNoIdentity = errors.New("the client certificate is not a Shoal certificate of this cluster")

// Identity is who a verified peer certificate speaks for.
type Identity struct {
	Role Role
	// Name is the CN: a worker's node ID, a manager's replica ID, "admin".
	Name string
	// NotAfter is when the certificate expires.
	NotAfter time.Time
}

// NodeID returns a worker's node ID (0 if Name is not a number).
func (id Identity) NodeID() uint64 {
	n, _ := strconv.ParseUint(id.Name, 10, 64)
	return n
}

// Identify reads the identity of a leaf certificate that TLS already
// verified against the cluster root: its role, its name, and that it
// belongs to cluster.
func Identify(leaf *x509.Certificate, cluster string) (Identity, error) {
	if leaf == nil {
		return Identity{}, ErrNoIdentity
	}
	s := leaf.Subject
	if len(s.Organization) != 1 || s.Organization[0] != cluster || len(s.OrganizationalUnit) != 1 || s.CommonName == "" {
		return Identity{}, ErrNoIdentity
	}
	id := Identity{Role: Role(s.OrganizationalUnit[0]), Name: s.CommonName, NotAfter: leaf.NotAfter}
	switch id.Role {
	case RoleWorker:
		if id.NodeID() == 0 {
			return Identity{}, fmt.Errorf("%w: a worker certificate must name a node ID", ErrNoIdentity)
		}
	case RoleManager, RoleAdmin:
	default:
		return Identity{}, fmt.Errorf("%w: unknown role %q", ErrNoIdentity, id.Role)
	}
	return id, nil
}
