package security

import (
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// tokenPrefix starts every join token; the 1 is the format version.
const tokenPrefix = "SHOAL-1-"

// secretEncoding writes a token's secret: lower-case base32, no padding.
var secretEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Errors a join token can meet. Each says what is wrong and what to do; none
// ever repeats the secret.
var (
	ErrTokenFormat = errors.New("the join token is malformed: a Shoal join token looks like SHOAL-1-<64 hex digits>-<26 letters and digits>; " +
		"print a current one on a manager with `shoal token worker` or `shoal token manager`")
	ErrTokenOtherCluster = errors.New("the join token belongs to another cluster: its CA digest does not match this cluster's CA; " +
		"use a token printed by `shoal token worker|manager` against this cluster")
	ErrTokenRotated = errors.New("the join token is not valid: its secret does not match a current token (it was rotated, or mistyped); " +
		"print the current one with `shoal token worker` or `shoal token manager`")
	ErrTokenWrongRole = errors.New("the join token is the worker token: a manager joins with the manager token (`shoal token manager`)")
)

// Secret is the random part of a token.
type Secret [16]byte

// NewSecret draws a fresh secret.
func NewSecret(rnd io.Reader) (Secret, error) {
	var s Secret
	_, err := io.ReadFull(rnd, s[:])
	return s, err
}

// Text encodes the secret (26 characters).
func (s Secret) Text() string { return secretEncoding.EncodeToString(s[:]) }

// ParseSecret decodes Text's output.
func ParseSecret(text string) (Secret, error) {
	var s Secret
	b, err := secretEncoding.DecodeString(text)
	if err != nil || len(b) != len(s) {
		return s, ErrTokenFormat
	}
	copy(s[:], b)
	return s, nil
}

// Token is a parsed join token.
type Token struct {
	Digest Digest // the root CA's digest: which cluster
	Secret Secret
}

// String formats the token. It holds the secret: never log it.
func (t Token) String() string { return tokenPrefix + t.Digest.String() + "-" + t.Secret.Text() }

// ParseToken parses SHOAL-1-<digest>-<secret>.
func ParseToken(s string) (Token, error) {
	var t Token
	s = strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		if strings.HasPrefix(s, "SHOAL-") {
			return t, fmt.Errorf("%w (this token's format version is not 1; use a token of this Shoal version)", ErrTokenFormat)
		}
		return t, ErrTokenFormat
	}
	dig, sec, ok := strings.Cut(rest, "-")
	if !ok || len(dig) != 2*len(t.Digest) {
		return t, ErrTokenFormat
	}
	if n, err := hex.Decode(t.Digest[:], []byte(dig)); err != nil || n != len(t.Digest) {
		return t, ErrTokenFormat
	}
	var err error
	if t.Secret, err = ParseSecret(sec); err != nil {
		return t, ErrTokenFormat
	}
	return t, nil
}

// Secrets are a cluster's current join secrets, one per role that may join.
type Secrets struct {
	Worker  Secret
	Manager Secret
}

// For returns the secret of role (workers and managers only).
func (s Secrets) For(r Role) (Secret, bool) {
	switch r {
	case RoleWorker:
		return s.Worker, true
	case RoleManager:
		return s.Manager, true
	}
	return Secret{}, false
}

// Verify checks a token presented to join as role against this cluster's
// digest and secrets, comparing secrets in constant time.
func (s Secrets) Verify(t Token, cluster Digest, role Role) error {
	if subtle.ConstantTimeCompare(t.Digest[:], cluster[:]) != 1 {
		return ErrTokenOtherCluster
	}
	worker := subtle.ConstantTimeCompare(t.Secret[:], s.Worker[:]) == 1
	manager := subtle.ConstantTimeCompare(t.Secret[:], s.Manager[:]) == 1
	switch {
	case role == RoleManager && manager, role == RoleWorker && worker:
		return nil
	case role == RoleManager && worker:
		return ErrTokenWrongRole
	case role == RoleWorker && manager:
		// A manager token would let a worker in; refuse it so the manager
		// token is never handed to nodes by mistake.
		return errors.New("the join token is the manager token: an agent joins with the worker token (`shoal token worker`)")
	}
	return ErrTokenRotated
}
