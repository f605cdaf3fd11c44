package check

import "strings"

// addrID names an address on a network, without its prefix length, as an
// integer: the tables of addresses (the stream's, the agents', the
// releases) are keyed by it instead of by the string "network address".
// Hashing and comparing a string, and building it for every address of
// every event and hold, was a good part of the checker's map work on
// tables of a million entries.
//
// The high 32 bits are the network's number in the checker's table of
// networks (few, named once); the low 32 bits are the IPv4 address when
// the address is one written canonically (four decimal numbers 0–255
// without leading zeros), else the number of the address string in a
// table of its own, with bit 31 of the network part set. Two addresses
// have one addrID exactly when their addrKey strings are equal.
type addrID uint64

const otherAddr = 1 << 31 // in the network part: the low half numbers a string

// addrTable numbers networks and non-IPv4 addresses (kept by the checker,
// under its lock).
type addrTable struct {
	nets   names // networks
	others names // addresses that are not canonical IPv4
}

// names numbers strings in the order they are first seen.
type names struct {
	ids  map[string]uint32
	strs []string
}

// id returns s's number, giving it the next one if it has none yet.
func (t *names) id(s string) uint32 {
	n, ok := t.ids[s]
	if !ok {
		if t.ids == nil {
			t.ids = map[string]uint32{}
		}
		n = uint32(len(t.strs))
		t.ids[s] = n
		t.strs = append(t.strs, s)
	}
	return n
}

// id returns the addrID of addr (a prefix length is cut) on network.
func (t *addrTable) id(network, addr string) addrID {
	if i := strings.IndexByte(addr, '/'); i >= 0 {
		addr = addr[:i]
	}
	n := t.nets.id(network)
	if ip, ok := parseIPv4(addr); ok {
		return addrID(uint64(n)<<32 | uint64(ip))
	}
	return addrID(uint64(n|otherAddr)<<32 | uint64(t.others.id(addr)))
}

// name returns the addrKey string of id.
func (t *addrTable) name(id addrID) string {
	n, lo := uint32(id>>32), uint32(id)
	if n&otherAddr != 0 {
		return t.nets.strs[n&^otherAddr] + " " + t.others.strs[lo]
	}
	b := make([]byte, 0, len(t.nets.strs[n])+16)
	b = append(b, t.nets.strs[n]...)
	b = append(b, ' ')
	for i := 3; i >= 0; i-- {
		b = appendUint8(b, byte(lo>>(8*i)))
		if i > 0 {
			b = append(b, '.')
		}
	}
	return string(b)
}

func appendUint8(b []byte, v byte) []byte {
	if v >= 100 {
		b = append(b, '0'+v/100)
	}
	if v >= 10 {
		b = append(b, '0'+v/10%10)
	}
	return append(b, '0'+v%10)
}

// parseIPv4 reads s as a canonically written IPv4 address: four decimal
// numbers 0–255, no leading zeros, nothing else. Any other spelling is
// not one, so that equal addrIDs stay equal strings.
func parseIPv4(s string) (uint32, bool) {
	var ip uint32
	part := 0
	for i := 0; i < 4; i++ {
		if i > 0 {
			if part >= len(s) || s[part] != '.' {
				return 0, false
			}
			part++
		}
		v, digits := 0, 0
		for part < len(s) && s[part] >= '0' && s[part] <= '9' {
			if digits > 0 && v == 0 {
				return 0, false // a leading zero
			}
			v = v*10 + int(s[part]-'0')
			digits++
			part++
			if v > 255 {
				return 0, false
			}
		}
		if digits == 0 {
			return 0, false
		}
		ip = ip<<8 | uint32(v)
	}
	if part != len(s) {
		return 0, false
	}
	return ip, true
}
