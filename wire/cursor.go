package wire

import (
	"encoding/base64"
	"encoding/binary"

	"shoal/internal/varint"
)

// Cursor is one applied Raft index per group; element 0 is the cluster group,
// element k service group k. It travels as one opaque URL-safe token.
type Cursor []uint64

// cursorVersion is the first byte of every encoded cursor.
const cursorVersion = 1

// maxCursorGroups bounds a parsed cursor: the cluster group plus one per
// possible service group (Session.Groups is a uint16).
const maxCursorGroups = 1 + 1<<16

// maxTokenLen is the longest token ParseCursor looks at.
var maxTokenLen = base64.RawURLEncoding.EncodedLen(1 + maxCursorGroups*binary.MaxVarintLen64)

var tokenEncoding = base64.RawURLEncoding.Strict()

// Token returns the cursor as an opaque URL-safe token: "" for an empty
// cursor, otherwise unpadded base64url of a version byte followed by one
// uvarint per group.
func (c Cursor) Token() string {
	if len(c) == 0 {
		return ""
	}
	var stack [64]byte
	b := append(stack[:0], cursorVersion)
	for _, v := range c {
		b = binary.AppendUvarint(b, v)
	}
	return tokenEncoding.EncodeToString(b)
}

// AppendToken appends c's Token to b (a stream that writes a token into
// every line makes no string of it).
func (c Cursor) AppendToken(b []byte) []byte {
	if len(c) == 0 {
		return b
	}
	var stack [1024]byte
	raw := append(stack[:0], cursorVersion)
	for _, v := range c {
		raw = binary.AppendUvarint(raw, v)
	}
	return tokenEncoding.AppendEncode(b, raw)
}

// ParseCursor parses a token made by Token. "" is the empty cursor. Only the
// canonical form is accepted, so ParseCursor(t).Token() == t for every token
// it accepts.
func ParseCursor(tok string) (Cursor, error) {
	if tok == "" {
		return nil, nil
	}
	if len(tok) > maxTokenLen {
		return nil, errorf(ErrBadCursor, "index token of %d characters is not valid: it is longer than any index Shoal makes", len(tok))
	}
	b, err := tokenEncoding.DecodeString(tok)
	if err != nil || len(b) < 2 || !urlSafe(tok) {
		return nil, errorf(ErrBadCursor, "index token %q is not valid: use the token from an X-Shoal-Index header or an earlier answer, or none", clip(tok))
	}
	if b[0] != cursorVersion {
		return nil, errorf(ErrBadCursor, "index token %q is not valid: it has version %d, this Shoal reads version %d", clip(tok), b[0], cursorVersion)
	}
	b = b[1:]
	c := make(Cursor, 0, min(len(b), maxCursorGroups))
	for len(b) > 0 {
		v, n := binary.Uvarint(b)
		if n <= 0 || n != varint.UvarintLen(v) || len(c) == maxCursorGroups {
			return nil, errorf(ErrBadCursor, "index token %q is not valid: it is damaged", clip(tok))
		}
		c = append(c, v)
		b = b[n:]
	}
	return c, nil
}

// urlSafe reports whether s has only base64url characters (the decoder
// skips newlines, which would make two tokens name one cursor).
func urlSafe(s string) bool {
	for i := range len(s) {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// clip shortens a token for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// Get returns the index of group g, 0 when the cursor has no part for it.
func (c Cursor) Get(g int) uint64 {
	if g < 0 || g >= len(c) {
		return 0
	}
	return c[g]
}

// Passed reports whether some group of c is strictly past o's part for that
// group (missing parts count as 0): whether c has news for a reader at o.
func (c Cursor) Passed(o Cursor) bool {
	for g, v := range c {
		if v > o.Get(g) {
			return true
		}
	}
	return false
}

// Merge returns the per-group maximum of c and o as a new slice.
func (c Cursor) Merge(o Cursor) Cursor {
	if len(c) == 0 && len(o) == 0 {
		return nil
	}
	m := make(Cursor, max(len(c), len(o)))
	for g := range m {
		m[g] = max(c.Get(g), o.Get(g))
	}
	return m
}
