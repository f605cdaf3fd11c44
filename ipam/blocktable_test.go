package ipam

import (
	"net/netip"
	"testing"
)

// TestTablesReachOnlyTheBlocksInUse: a pool's per-block tables and its
// holder index are as long as the highest block or chunk in use, not the
// subnet (a group's copy of a large network uses few of its blocks), and
// they grow to reach an address taken near the end, through a snapshot
// round trip and a clone.
func TestTablesReachOnlyTheBlocksInUse(t *testing.T) {
	p := newTestPool(t, "10.0.0.0/14", 64) // 4,096 blocks, 1,024 holder chunks
	for task := uint64(1); task <= 1250; task++ {
		if !p.HasFree(1) {
			if _, err := p.LeaseBlock(1); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := p.Allocate(1, task); err != nil {
			t.Fatal(err)
		}
	}
	// 1,250 addresses fill 20 blocks and 5 holder chunks; room doubles.
	if n := len(p.used.v); n > 32 {
		t.Errorf("the used-address table has %d blocks, want at most 32", n)
	}
	if n := len(p.blockOwner.v); n > 32 {
		t.Errorf("the owner table has %d blocks, want at most 32", n)
	}
	if n := len(p.holders.chunks); n > 8 {
		t.Errorf("the holder index has %d chunks, want at most 8", n)
	}
	if err := p.CheckInvariants(); err != nil {
		t.Fatal(err)
	}

	// The last block: the tables grow to it, and what is past them reads 0.
	last := BlockID(p.NumBlocks() - 1)
	if err := p.LeaseBlockAt(2, last); err != nil {
		t.Fatal(err)
	}
	top := netip.MustParseAddr("10.3.255.250")
	if err := p.AllocateAddr(2, top, 9999); err != nil {
		t.Fatal(err)
	}
	if o, _ := p.BlockOwner(last); o != 2 {
		t.Fatalf("the last block's owner is %d, want 2", o)
	}
	if o, _ := p.BlockOwner(last - 1); o != 0 {
		t.Fatalf("the block before the last has owner %d, want none", o)
	}
	for _, q := range []*Pool{p, p.Clone(), roundTrip(t, p)} {
		if err := q.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		if h, _ := q.Holder(top); h.ID != 9999 {
			t.Fatalf("%s is held by %d, want 9999", top, h.ID)
		}
	}
	if err := p.Release(top, 9999, 1, 1); err != nil {
		t.Fatal(err)
	}
	p.ConfirmSync(1, 1, nil)
	if err := p.ReleaseBlock(2, last); err != nil {
		t.Fatal(err)
	}
	if err := p.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func roundTrip(t *testing.T, p *Pool) *Pool {
	t.Helper()
	enc, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var q Pool
	if err := q.UnmarshalBinary(enc); err != nil {
		t.Fatal(err)
	}
	return &q
}
