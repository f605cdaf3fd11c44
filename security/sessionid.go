package security

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"slices"
	"time"
)

// A resumed TLS session carries the client's certificate chain in its
// ticket, and crypto/tls parses the chain again on the server at every
// resumption, keeping the parse (and the decrypted ticket it points into)
// for as long as any connection resumed from it lives: about 5 kB per
// connected agent on each manager, beside a client hello about a
// kilobyte longer on every resumed connection, which crypto/tls's record
// buffers keep the size of. IdentityTickets puts in the ticket only what
// the manager reads from the chain: the identity (role, name, the leaf's
// expiry) and what crypto/tls checks again when a session resumes (that
// every certificate of the verified chain is still within its validity
// period and that the chain ends in the cluster's root).

// SessionIdentity is the identity a resumed session carries in place of
// its client certificate: Identity as Identify read it from the verified
// leaf at the session's full handshake, for Cluster.
type SessionIdentity struct {
	Identity
	Cluster string

	from, until int64 // the chain's validity, Unix seconds
}

// SessionKeeper is a server connection (the one TLS runs over) that keeps
// the identity of the session its client resumed. KeepSessionIdentity is
// called during the handshake, in its goroutine: with the identity when a
// ticket that carries one is taken, with nil when another ticket is.
type SessionKeeper interface {
	KeepSessionIdentity(*SessionIdentity)
}

// sessionIDTag starts the entry IdentityTickets adds to a session's Extra
// (crypto/tls asks that entries be recognizable by a prefix).
var sessionIDTag = []byte("shoal-session-identity-v1\x00")

// IdentityTickets makes the session tickets cfg (a manager's server
// configuration, after ShareTickets) issues to clients whose verified
// certificate names an identity of ca's cluster carry that identity
// instead of the certificate chain. Such a ticket is encrypted with a key
// of its own (derived from the root key as ShareTickets' is, under another
// name), so that only a manager that reads the identity takes it: to
// crypto/tls alone it would be a session without a client certificate.
// It resumes only on a connection that keeps its identity (the connection
// under TLS is a SessionKeeper; elsewhere the client makes a full
// handshake), and only while the chain it was issued for is valid: each
// of its certificates within its validity period, at the configuration's
// time, and its root still the cluster's, as crypto/tls checks a ticket
// that carries the chain. A resumed connection then has no peer
// certificates in its connection state: its identity is the one its
// SessionKeeper was given. Other sessions (no client certificate, or one
// that names no identity here) keep crypto/tls's own tickets.
//
// now is the clock those checks read when cfg has none (Config.Time): the
// one crypto/tls reads then, time.Now.
func IdentityTickets(cfg *tls.Config, ca *CA, now func() time.Time) error {
	if ca == nil || ca.Root == nil {
		return errors.New("keeping identities in session tickets needs the cluster's root certificate")
	}
	k, err := ticketKey(ca, "shoal manager identity tickets v1")
	if err != nil {
		return err
	}
	if cfg.Time != nil {
		now = cfg.Time
	}
	if now == nil {
		return errors.New("keeping identities in session tickets needs a clock")
	}
	t := &identityTickets{cfg: cfg, keys: &tls.Config{}, cluster: ca.ClusterID, root: ca.Root, rootSum: sha256.Sum256(ca.Root.Raw),
		now: now, handshakes: make(chan *handshake, spareHandshakes)}
	t.keys.SetSessionTicketKeys([][32]byte{k})
	cfg.WrapSession = func(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
		return t.wrap(cs, ss, nil)
	}
	cfg.UnwrapSession = func(ticket []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
		return t.unwrap(ticket, cs, nil, now)
	}
	next := cfg.GetConfigForClient
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		var c *tls.Config
		if next != nil {
			var err error
			if c, err = next(hello); err != nil {
				return nil, err
			}
		}
		k, ok := hello.Conn.(SessionKeeper)
		if !ok || !slices.Contains(hello.Extensions, extensionPreSharedKey) {
			return c, nil
		}
		if c != nil {
			return t.newHandshake(c).take(k), nil
		}
		var h *handshake
		select {
		case h = <-t.handshakes:
		default:
			h = t.newHandshake(cfg)
			h.spares = t.handshakes
		}
		return h.take(k), nil
	}
	return nil
}

// extensionPreSharedKey is the client hello's pre_shared_key extension: the
// client offers a session to resume.
const extensionPreSharedKey = 41

type identityTickets struct {
	cfg     *tls.Config // holds the keys of crypto/tls's own tickets
	keys    *tls.Config // holds the key of the tickets that carry an identity
	cluster string
	root    *x509.Certificate
	rootSum [32]byte

	now func() time.Time

	handshakes chan *handshake // spare copies of cfg, for handshakes to come
}

// spareHandshakes is how many copies of the configuration are kept for
// handshakes to come: about as many as run at once.
const spareHandshakes = 256

// handshake is a copy of a configuration for handshakes whose client
// offered a session: it gives its connection's SessionKeeper the identity
// of the session taken, and the ticket the connection issues after
// carries it on. A handshake's callbacks are done once it issued its
// ticket (a TLS 1.3 server issues one, at the end of its handshake, and
// takes a ticket only before), so the copy then serves the next one (the
// spares are a buffered channel: this package starts nothing and locks
// nothing): the connection keeps it as its configuration, and reads no
// more of it than the fields every copy shares. (A copy per connection is
// 500 bytes kept for its life.)
type handshake struct {
	cfg     *tls.Config
	spares  chan *handshake // where it goes once done; nil: not reused
	keep    SessionKeeper
	resumed *SessionIdentity // the last ticket taken's
}

func (t *identityTickets) newHandshake(base *tls.Config) *handshake {
	h := &handshake{cfg: base.Clone()}
	c := h.cfg
	c.GetConfigForClient = nil
	now := t.now
	if c.Time != nil {
		now = c.Time
	}
	keep := func(id *SessionIdentity) { h.resumed = id; h.keep.KeepSessionIdentity(id) }
	c.UnwrapSession = func(ticket []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
		return t.unwrap(ticket, cs, keep, now)
	}
	c.WrapSession = func(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
		b, err := t.wrap(cs, ss, h.resumed)
		if h.spares != nil {
			h.keep, h.resumed = nil, nil
			select {
			case h.spares <- h:
			default: // enough spares: h goes with its connection
			}
		}
		return b, err
	}
	return h
}

// take readies h for k's handshake and returns its configuration.
func (h *handshake) take(k SessionKeeper) *tls.Config {
	h.keep, h.resumed = k, nil
	return h.cfg
}

// wrap issues the ticket of ss: with the identity of the verified chain,
// or resumed's on a connection that resumed one without a chain, when
// there is one; crypto/tls's own ticket otherwise.
func (t *identityTickets) wrap(cs tls.ConnectionState, ss *tls.SessionState, resumed *SessionIdentity) ([]byte, error) {
	var entry []byte
	switch {
	case len(cs.VerifiedChains) == 1 && len(cs.PeerCertificates) > 0:
		entry = t.entryOf(cs.VerifiedChains[0])
	case len(cs.PeerCertificates) == 0 && cs.DidResume && resumed != nil:
		entry = t.entry(resumed)
	}
	if entry == nil {
		return t.cfg.EncryptTicket(cs, ss)
	}
	b, err := ss.Bytes()
	if err != nil {
		return nil, err
	}
	bare, ok := withoutCertificates(b)
	if !ok {
		return t.cfg.EncryptTicket(cs, ss)
	}
	compact, err := tls.ParseSessionState(bare)
	if err != nil {
		return t.cfg.EncryptTicket(cs, ss)
	}
	compact.Extra = append(compact.Extra, entry)
	return t.keys.EncryptTicket(cs, compact)
}

// unwrap takes a ticket: crypto/tls's own as crypto/tls would, one that
// carries an identity only with keep (told the identity) and while its
// chain is valid at now; nil (a full handshake) otherwise.
func (t *identityTickets) unwrap(ticket []byte, cs tls.ConnectionState, keep func(*SessionIdentity), now func() time.Time) (*tls.SessionState, error) {
	ss, err := t.keys.DecryptTicket(ticket, cs)
	if err != nil {
		return nil, err
	}
	if ss == nil { // not one of ours: crypto/tls's own, if any
		ss, err = t.cfg.DecryptTicket(ticket, cs)
		if err != nil || ss == nil {
			return ss, err
		}
		if keep != nil {
			keep(nil)
		}
		return ss, nil
	}
	if keep == nil {
		return nil, nil
	}
	var entry []byte
	for _, e := range ss.Extra {
		if bytes.HasPrefix(e, sessionIDTag) {
			entry = e
		}
	}
	if entry == nil {
		return nil, nil
	}
	id, ok := t.identityOf(entry, now())
	if !ok {
		return nil, nil
	}
	keep(id)
	return ss, nil
}

// The entry: the tag, the root's SHA-256, the chain's validity (the
// latest NotBefore and the earliest NotAfter of its certificates, Unix
// seconds), the leaf's NotAfter, then the role and the name (each a
// length byte and its bytes).
const entryFixed = 32 + 3*8

// entryOf returns the entry for a verified chain (leaf first), nil if it
// does not name an identity of the cluster or does not end in its root.
func (t *identityTickets) entryOf(chain []*x509.Certificate) []byte {
	if len(chain) < 2 || !chain[len(chain)-1].Equal(t.root) {
		return nil
	}
	id, err := Identify(chain[0], t.cluster)
	if err != nil || len(id.Role) > 255 || len(id.Name) > 255 {
		return nil
	}
	from, until := chain[0].NotBefore, chain[0].NotAfter
	for _, c := range chain {
		if c.NotBefore.After(from) {
			from = c.NotBefore
		}
		if c.NotAfter.Before(until) {
			until = c.NotAfter
		}
	}
	if !wholeSeconds(from) || !wholeSeconds(until) || !wholeSeconds(id.NotAfter) {
		return nil
	}
	return t.entry(&SessionIdentity{Identity: id, Cluster: t.cluster, from: from.Unix(), until: until.Unix()})
}

// entry encodes id.
func (t *identityTickets) entry(id *SessionIdentity) []byte {
	e := make([]byte, 0, len(sessionIDTag)+entryFixed+2+len(id.Role)+len(id.Name))
	e = append(e, sessionIDTag...)
	e = append(e, t.rootSum[:]...)
	e = binary.BigEndian.AppendUint64(e, uint64(id.from))
	e = binary.BigEndian.AppendUint64(e, uint64(id.until))
	e = binary.BigEndian.AppendUint64(e, uint64(id.NotAfter.Unix()))
	e = append(e, byte(len(id.Role)))
	e = append(e, id.Role...)
	e = append(e, byte(len(id.Name)))
	e = append(e, id.Name...)
	return e
}

// wholeSeconds: tm survives a round trip through Unix seconds (x509 times
// always do).
func wholeSeconds(tm time.Time) bool { return tm.Nanosecond() == 0 }

// identityOf reads an entry, checking it at now as crypto/tls checks the
// chain a ticket carries: the root is the cluster's, and now is within
// every certificate's validity period (so before the leaf's NotAfter).
func (t *identityTickets) identityOf(e []byte, now time.Time) (*SessionIdentity, bool) {
	e = e[len(sessionIDTag):]
	if len(e) < entryFixed+2 || !bytes.Equal(e[:32], t.rootSum[:]) {
		return nil, false
	}
	from := time.Unix(int64(binary.BigEndian.Uint64(e[32:])), 0)
	until := time.Unix(int64(binary.BigEndian.Uint64(e[40:])), 0)
	leafUntil := time.Unix(int64(binary.BigEndian.Uint64(e[48:])), 0)
	if now.Before(from) || now.After(until) || now.After(leafUntil) {
		return nil, false
	}
	e = e[entryFixed:]
	role, e, ok := lengthPrefixed(e)
	if !ok {
		return nil, false
	}
	name, e, ok := lengthPrefixed(e)
	if !ok || len(e) != 0 {
		return nil, false
	}
	return &SessionIdentity{Identity: Identity{Role: roleOf(role), Name: string(name), NotAfter: leafUntil.UTC()},
		Cluster: t.cluster, from: from.Unix(), until: until.Unix()}, true
}

func lengthPrefixed(e []byte) (v, rest []byte, ok bool) {
	if len(e) < 1 || len(e) < 1+int(e[0]) {
		return nil, nil, false
	}
	return e[1 : 1+int(e[0])], e[1+int(e[0]):], true
}

// roleOf returns the role named r, the package's own string for a known
// one (no copy kept per connection).
func roleOf(r []byte) Role {
	for _, known := range []Role{RoleWorker, RoleManager, RoleAdmin} {
		if string(r) == string(known) {
			return known
		}
	}
	return Role(r)
}

// withoutCertificates returns the encoding of a TLS 1.3 server session
// (SessionState.Bytes) with no peer certificates and no verified chains,
// false if b is not laid out as this expects: version, type, cipher
// suite, creation time, secret, extra, extended master secret, early
// data, then the certificates and the chains (crypto/tls calls its layout
// opaque; a layout this does not know leaves the session's ticket as
// crypto/tls makes it).
func withoutCertificates(b []byte) ([]byte, bool) {
	const fixed = 2 + 1 + 2 + 8
	if len(b) < fixed+1 || binary.BigEndian.Uint16(b) != tls.VersionTLS13 || b[2] != 1 {
		return nil, false
	}
	i := fixed
	i += 1 + int(b[i]) // the secret
	if i+3 > len(b) {
		return nil, false
	}
	i += 3 + uint24(b[i:]) // extra
	i += 2                 // extended master secret, early data
	if i > len(b) || b[i-1] != 0 {
		return nil, false
	}
	head := i
	for range 2 { // the certificates, the chains
		if i+3 > len(b) {
			return nil, false
		}
		i += 3 + uint24(b[i:])
	}
	if i > len(b) {
		return nil, false
	}
	out := make([]byte, 0, head+6+len(b)-i)
	out = append(out, b[:head]...)
	out = append(out, 0, 0, 0, 0, 0, 0)
	return append(out, b[i:]...), true
}

func uint24(b []byte) int { return int(b[0])<<16 | int(b[1])<<8 | int(b[2]) }
