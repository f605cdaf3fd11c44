package ipam

// chunkBits sets the holder table's chunk size: 256 slots of 8 bytes.
const (
	chunkBits = 8
	chunkSize = 1 << chunkBits
)

// holderTable maps offsets to holder IDs (0 = none). Memory is allocated per
// chunk of chunkSize offsets while the chunk has an occupied slot, so a
// sparse pool costs little and a dense one 8 bytes an address. The chunk
// index reaches only as far as the highest chunk ever occupied (addresses
// are handed out lowest first): a group's copy of a /14 indexed all 1,024
// chunks of it, 10 kB, for the five its 1,250 addresses filled.
type holderTable struct {
	chunks []*[chunkSize]uint64
	live   []uint16 // occupied slots per chunk
	limit  uint32   // chunks the subnet has: the index never grows past it
}

func newHolderTable(size uint32) holderTable {
	return holderTable{limit: (size + chunkSize - 1) >> chunkBits}
}

func (t *holderTable) get(off uint32) uint64 {
	i := off >> chunkBits
	if int(i) >= len(t.chunks) || t.chunks[i] == nil {
		return 0
	}
	return t.chunks[i][off&(chunkSize-1)]
}

// set records id (not 0) at an unoccupied offset.
func (t *holderTable) set(off uint32, id uint64) {
	i := off >> chunkBits
	if int(i) >= len(t.chunks) {
		t.chunks = growZeroed(t.chunks, int(i)+1, int(t.limit))
		t.live = growZeroed(t.live, int(i)+1, int(t.limit))
	}
	c := t.chunks[i]
	if c == nil {
		c = new([chunkSize]uint64)
		t.chunks[i] = c
	}
	c[off&(chunkSize-1)] = id
	t.live[i]++
}

// clear empties an occupied offset and drops its chunk when it empties.
func (t *holderTable) clear(off uint32) {
	i := off >> chunkBits
	t.chunks[i][off&(chunkSize-1)] = 0
	t.live[i]--
	if t.live[i] == 0 {
		t.chunks[i] = nil
	}
}
