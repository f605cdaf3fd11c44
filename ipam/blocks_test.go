package ipam

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestBlocksPartitionAllocation(t *testing.T) {
	p := newTestPool(t, "10.0.0.0/26", 16) // 4 blocks of 16; block 0 holds network+gateway, block 3 broadcast
	if _, err := p.Allocate(1, 1); !errors.Is(err, ErrExhausted) || !strings.Contains(err.Error(), "has no address block for group 1") {
		t.Fatalf("Allocate without a lease = %v", err)
	}
	b0, err := p.LeaseBlock(1)
	if err != nil || b0 != 0 {
		t.Fatalf("LeaseBlock = %d, %v, want block 0", b0, err)
	}
	b1, _ := p.LeaseBlock(2)
	if pfx, _ := p.BlockPrefix(b1); pfx != netip.MustParsePrefix("10.0.0.16/28") {
		t.Fatalf("BlockPrefix(%d) = %s", b1, pfx)
	}
	// Owner 1's block 0 has 14 usable addresses; the 15th allocation asks
	// for another block.
	for i := range 14 {
		a := mustAlloc(t, p, 1, uint64(100+i))
		if b, _ := p.BlockOf(a); b != b0 {
			t.Fatalf("owner 1 got %s from block %d", a, b)
		}
	}
	_, err = p.Allocate(1, 200)
	if !errors.Is(err, ErrExhausted) || !strings.Contains(err.Error(), "no free address for group 1") || !strings.Contains(err.Error(), "14 held") {
		t.Fatalf("owner 1 exhausted = %v", err)
	}
	if a := mustAlloc(t, p, 2, 300); a != mustAddr("10.0.0.16") {
		t.Fatalf("owner 2 got %s", a)
	}
	// Owner 0 uses only unleased blocks.
	if a := mustAlloc(t, p, 0, 400); a != mustAddr("10.0.0.32") {
		t.Fatalf("owner 0 got %s", a)
	}
	// Block 2 is now in use by owner 0, so owner 1's next lease is block 3.
	if b, err := p.LeaseBlock(1); err != nil || b != 3 {
		t.Fatalf("LeaseBlock = %d, %v, want 3", b, err)
	}
	if a := mustAlloc(t, p, 1, 201); a != mustAddr("10.0.0.48") {
		t.Fatalf("owner 1 after second lease got %s", a)
	}
	if got := p.Blocks(1); !slices.Equal(got, []BlockID{0, 3}) {
		t.Fatalf("Blocks(1) = %v", got)
	}
	_, err = p.LeaseBlock(4)
	if !errors.Is(err, ErrNoFreeBlock) || !errors.Is(err, ErrExhausted) {
		t.Fatalf("LeaseBlock with none left = %v", err)
	}
	if o, _ := p.BlockOwner(3); o != 1 || p.FreeIn(1) != 14 || p.FreeIn(0) != 15 || p.FreeIn(9) != 0 {
		t.Fatalf("BlockOwner %d, FreeIn(1) %d, FreeIn(0) %d", o, p.FreeIn(1), p.FreeIn(0))
	}
	checkPool(t, p)
}

func TestReleaseBlock(t *testing.T) {
	p := newTestPool(t, "10.0.0.0/26", 16)
	b, _ := p.LeaseBlock(1)
	a := mustAlloc(t, p, 1, 1)
	for _, tc := range []struct {
		owner   uint32
		block   BlockID
		wantErr error
		msg     string
	}{
		{1, 9, ErrInvalidBlock, "past the 4 blocks"},
		{2, b, ErrNotLeased, "leased to owner 1, not 2"},
		{0, b, ErrNotLeased, ""},
		{1, b, ErrBlockInUse, "still has 1"},
	} {
		if err := p.ReleaseBlock(tc.owner, tc.block); !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ReleaseBlock(%d, %d) = %v, want %v containing %q", tc.owner, tc.block, err, tc.wantErr, tc.msg)
		}
	}
	if err := p.Release(a, 1, 3, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.ReleaseBlock(1, b); !errors.Is(err, ErrBlockInUse) {
		t.Fatalf("ReleaseBlock with a quarantined address = %v", err)
	}
	p.ConfirmSync(3, 1, nil)
	if err := p.ReleaseBlock(1, b); err != nil {
		t.Fatal(err)
	}
	if len(p.Blocks(1)) != 0 || p.FreeIn(0) != p.Size() {
		t.Fatalf("after ReleaseBlock: blocks %v, unleased free %d of %d", p.Blocks(1), p.FreeIn(0), p.Size())
	}
	checkPool(t, p)
}

func TestLeaseBlockAt(t *testing.T) {
	p := newTestPool(t, "10.0.0.0/28", 4) // blocks 0..3; block 0 = network+gateway+.2+.3
	q, err := New(Config{Subnet: netip.MustParsePrefix("10.0.0.0/28"), BlockSize: 4,
		Reserved: []Range{{mustAddr("10.0.0.4"), mustAddr("10.0.0.7")}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.LeaseBlockAt(1, 1); !errors.Is(err, ErrInvalidBlock) || !strings.Contains(err.Error(), "no usable address") {
		t.Fatalf("LeaseBlockAt of a reserved block = %v", err)
	}
	if b, _ := q.LeaseBlock(1); b != 0 {
		t.Fatalf("LeaseBlock skipped to %d", b)
	}
	if b, _ := q.LeaseBlock(1); b != 2 {
		t.Fatalf("LeaseBlock must skip the fully reserved block 1, got %d", b)
	}
	mustAlloc(t, p, 0, 1) // 10.0.0.2, block 0 in use
	for _, tc := range []struct {
		owner   uint32
		block   BlockID
		wantErr error
	}{
		{0, 1, ErrInvalidID}, {1, 4, ErrInvalidBlock}, {1, 0, ErrBlockInUse},
	} {
		if err := p.LeaseBlockAt(tc.owner, tc.block); !errors.Is(err, tc.wantErr) {
			t.Errorf("LeaseBlockAt(%d, %d) = %v, want %v", tc.owner, tc.block, err, tc.wantErr)
		}
	}
	if err := p.LeaseBlockAt(2, 2); err != nil {
		t.Fatal(err)
	}
	if err := p.LeaseBlockAt(3, 2); !errors.Is(err, ErrBlockInUse) || !strings.Contains(err.Error(), "leased to owner 2") {
		t.Fatalf("LeaseBlockAt of a leased block = %v", err)
	}
	if _, err := p.LeaseBlock(0); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("LeaseBlock(0) = %v", err)
	}
	if err := p.AllocateAddr(2, mustAddr("10.0.0.9"), 9); err != nil {
		t.Fatal(err)
	}
	if _, err := p.BlockPrefix(99); !errors.Is(err, ErrInvalidBlock) {
		t.Fatalf("BlockPrefix(99) = %v", err)
	}
	if _, err := p.BlockOwner(99); !errors.Is(err, ErrInvalidBlock) {
		t.Fatalf("BlockOwner(99) = %v", err)
	}
	if _, err := p.BlockOf(mustAddr("10.1.0.0")); !errors.Is(err, ErrOutsideSubnet) {
		t.Fatalf("BlockOf outside = %v", err)
	}
	checkPool(t, p)
	checkPool(t, q)
}
