package statemachine

import (
	"sync"

	"shoal/ipam"
)

// mcPools is the model checker's pool codec: the address pools of the
// states it explores take only a few values (667 at net events=1), and
// decoding one (a dozen roaring bitmaps) cost a third of decoding a
// state. A decoded pool is kept, one per encoding, with its encoding, and
// shared by every state decoded with it (read-only: a state copies a
// shared pool before changing it, poolW), so encoding it again is a
// lookup. Only decoded pools are kept: the pools that steps make are many
// (every step that changes one) and mostly encoded once. The maps hold
// their pools, so a pointer is never reused while it is a key.
type mcPools struct {
	mu    sync.Mutex
	raw   map[*ipam.Pool][]byte // decoded pools' encodings
	pools map[string]*ipam.Pool // the shared pool of each encoding
}

// mcPoolsCap bounds the codec's maps and the key's (a cache: clearing it
// costs time).
const mcPoolsCap = 1 << 12

func newMCPools() *mcPools {
	return &mcPools{raw: map[*ipam.Pool][]byte{}, pools: map[string]*ipam.Pool{}}
}

func (c *mcPools) codec() poolCodec {
	if c == nil {
		return poolCodec{}
	}
	return poolCodec{encode: c.encode, decode: c.decode}
}

func (c *mcPools) encode(p *ipam.Pool, shared bool) ([]byte, error) {
	if !shared {
		return p.MarshalBinary()
	}
	c.mu.Lock()
	raw, ok := c.raw[p]
	c.mu.Unlock()
	if ok {
		return raw, nil
	}
	return p.MarshalBinary()
}

func (c *mcPools) decode(raw string) (*ipam.Pool, bool, error) {
	c.mu.Lock()
	p, ok := c.pools[raw]
	c.mu.Unlock()
	if ok {
		return p, true, nil
	}
	p = new(ipam.Pool)
	if err := p.UnmarshalBinary([]byte(raw)); err != nil {
		return nil, false, err
	}
	c.mu.Lock()
	if q, ok := c.pools[raw]; ok {
		p = q // another worker decoded it meanwhile
	} else {
		if len(c.pools) >= mcPoolsCap {
			clear(c.raw)
			clear(c.pools)
		}
		c.raw[p] = []byte(raw)
		c.pools[raw] = p
	}
	c.mu.Unlock()
	return p, true, nil
}
