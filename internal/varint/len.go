package varint

// UvarintLen is the length of v's minimal uvarint encoding (what
// binary.AppendUvarint writes), for sizing a buffer before encoding.
func UvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
