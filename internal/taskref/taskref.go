package taskref

import (
	"fmt"
	"strconv"
	"strings"

	"shoal/internal/mix"
)

const (
	// FullLen is the length of the whole printed form (64 bits: twelve
	// characters of 5 bits and a last one of 4).
	FullLen = 13
	// ShortLen is the length of the short form tables show.
	ShortLen = 12
)

// alphabet is Crockford's base 32, lower case: no i, l, o or u to misread.
const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// value maps a character (either case) to its 5 bits, or -1.
var value = func() (v [256]int8) {
	for i := range v {
		v[i] = -1
	}
	for i := 0; i < len(alphabet); i++ {
		v[alphabet[i]] = int8(i)
		v[strings.ToUpper(alphabet[i : i+1])[0]] = int8(i)
	}
	return v
}()

// Format writes id in its whole printed form, FullLen characters.
func Format(id uint64) string {
	m := mix.Mix64(id)
	var b [FullLen]byte
	for i := 0; i < FullLen-1; i++ {
		b[i] = alphabet[(m>>(59-5*i))&31]
	}
	b[FullLen-1] = alphabet[m&15]
	return string(b[:])
}

// Short writes id in the short form tables show: the first ShortLen
// characters of Format.
func Short(id uint64) string { return Format(id)[:ShortLen] }

// Prefix is what a user typed for a task: the tasks it matches are those
// whose mixed ID lies in [lo, hi].
type Prefix struct{ lo, hi uint64 }

// Match says whether id's printed form begins with the prefix (or id is the
// decimal ID typed).
func (p Prefix) Match(id uint64) bool {
	m := mix.Mix64(id)
	return p.lo <= m && m <= p.hi
}

// ParsePrefix reads what a user typed for a task: one to FullLen characters
// of the printed form (either case), or the whole decimal ID (more than
// FullLen digits, as the API's "id" field has it).
func ParsePrefix(s string) (Prefix, error) {
	if len(s) > FullLen {
		id, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return Prefix{}, fmt.Errorf("%q is not a task ID: a task ID is up to %d characters as `service ps` prints it, or the decimal number the API gives", s, FullLen)
		}
		m := mix.Mix64(id)
		return Prefix{m, m}, nil
	}
	if s == "" {
		return Prefix{}, fmt.Errorf("an empty task ID: give at least one character of the ID `service ps` prints")
	}
	var bits uint64
	width := 0
	for i := 0; i < len(s); i++ {
		v := value[s[i]]
		if v < 0 {
			return Prefix{}, fmt.Errorf("%q is not a task ID: task IDs use the digits and the letters a-z except i, l, o and u", s)
		}
		if i == FullLen-1 {
			if v > 15 {
				return Prefix{}, fmt.Errorf("%q is not a task ID: no task ID ends in %q", s, s[i:i+1])
			}
			bits = bits<<4 | uint64(v)
			width += 4
			continue
		}
		bits = bits<<5 | uint64(v)
		width += 5
	}
	if width == 64 {
		return Prefix{bits, bits}, nil
	}
	lo := bits << (64 - width)
	return Prefix{lo, lo | (1<<(64-width) - 1)}, nil
}
