package ipam

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func newTestPool(t testing.TB, cidr string, blockSize uint32) *Pool {
	t.Helper()
	p, err := New(Config{Name: "front", Subnet: netip.MustParsePrefix(cidr), BlockSize: blockSize})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustAlloc(t testing.TB, p *Pool, owner uint32, task uint64) netip.Addr {
	t.Helper()
	a, err := p.Allocate(owner, task)
	if err != nil {
		t.Fatalf("Allocate(%d, %d): %v", owner, task, err)
	}
	return a
}

func checkPool(t testing.TB, p *Pool) {
	t.Helper()
	if err := p.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestAllocateAddrErrors(t *testing.T) {
	p := newTestPool(t, "10.0.0.0/24", 64)
	if err := p.AllocateAddr(0, mustAddr("10.0.0.7"), 7); err != nil {
		t.Fatal(err)
	}
	if err := p.AllocateAddr(0, mustAddr("10.0.0.8"), 8); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(mustAddr("10.0.0.8"), 8, 1, 3); err != nil {
		t.Fatal(err)
	}
	if err := p.AllocateVIPAddr(0, mustAddr("10.0.0.9"), 70); err != nil {
		t.Fatal(err)
	}
	if _, err := p.LeaseBlock(5); err != nil { // block 0 holds used addresses: block 1 (10.0.0.64/26)
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		owner   uint32
		addr    string
		task    uint64
		wantErr error
		msg     string
	}{
		{"free address", 0, "10.0.0.20", 20, nil, ""},
		{"outside the subnet", 0, "10.0.1.1", 1, ErrOutsideSubnet, `10.0.1.1 is not in network "front" (10.0.0.0/24)`},
		{"IPv6 address", 0, "fd00::1", 1, ErrOutsideSubnet, "fd00::1"},
		{"zero address", 0, "invalid IP", 1, ErrOutsideSubnet, ""},
		{"network address", 0, "10.0.0.0", 1, ErrReserved, "10.0.0.0"},
		{"gateway", 0, "10.0.0.1", 1, ErrReserved, "gateway"},
		{"broadcast", 0, "10.0.0.255", 1, ErrReserved, ""},
		{"held by a task", 0, "10.0.0.7", 1, ErrInUse, "held by task 7"},
		{"held as a VIP", 0, "10.0.0.9", 1, ErrInUse, "held by service 70 (vip)"},
		{"quarantined", 0, "10.0.0.8", 1, ErrQuarantined, "released by task 8"},
		{"in another owner's block", 0, "10.0.0.70", 1, ErrNotLeased, "leased to group 5, not 0"},
		{"in an unleased block", 5, "10.0.0.130", 1, ErrNotLeased, "not leased to group 5"},
		{"holder 0", 0, "10.0.0.30", 0, ErrInvalidID, ""},
		{"owner's own block", 5, "10.0.0.66", 66, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a netip.Addr
			if tt.addr != "invalid IP" {
				a = mustAddr(tt.addr)
			}
			err := p.AllocateAddr(tt.owner, a, tt.task)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if h, ok := p.Holder(a); !ok || h != (Holder{KindTask, tt.task}) {
					t.Fatalf("Holder = %v, %v", h, ok)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("AllocateAddr(%s) = %v, want %v containing %q", tt.addr, err, tt.wantErr, tt.msg)
			}
		})
	}
	checkPool(t, p)
}

func TestExhaustedMessage(t *testing.T) {
	p := newTestPool(t, "10.0.0.0/29", 0) // .2 to .6 usable
	var addrs []netip.Addr
	for i := range uint64(5) {
		addrs = append(addrs, mustAlloc(t, p, 0, i+1))
	}
	for i, a := range addrs[:2] {
		if err := p.Release(a, uint64(i+1), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	_, err := p.Allocate(0, 9)
	if !errors.Is(err, ErrExhausted) {
		t.Fatalf("Allocate on a full pool = %v, want ErrExhausted", err)
	}
	for _, want := range []string{"pool exhausted", `"front" (10.0.0.0/29)`, "3 held", "2 quarantined"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	p.ConfirmSync(1, 1, nil)
	if a, err := p.Allocate(0, 9); err != nil || a != addrs[0] {
		t.Fatalf("after confirm Allocate = %s, %v, want %s", a, err, addrs[0])
	}
}

func TestAllocateDelaysReuse(t *testing.T) {
	p := newTestPool(t, "10.0.0.0/29", 0) // .2 to .6 usable
	a2, a3, a4 := mustAlloc(t, p, 0, 2), mustAlloc(t, p, 0, 3), mustAlloc(t, p, 0, 4)
	if a2 != mustAddr("10.0.0.2") || a4 != mustAddr("10.0.0.4") {
		t.Fatalf("allocation order %s %s %s", a2, a3, a4)
	}
	if err := p.FreeUnassigned(a3, 3); err != nil {
		t.Fatal(err)
	}
	// .3 is free again, but .5 and .6 lie ahead of the cursor: they go first.
	for _, want := range []string{"10.0.0.5", "10.0.0.6", "10.0.0.3"} {
		if got := mustAlloc(t, p, 0, 10); got != mustAddr(want) {
			t.Fatalf("Allocate = %s, want %s (a just-freed address must wait for the cursor to wrap)", got, want)
		}
	}
	checkPool(t, p)
}

func TestReleaseQuarantineConfirm(t *testing.T) {
	p := newTestPool(t, "10.0.0.0/24", 0)
	a := mustAlloc(t, p, 0, 1)
	b := mustAlloc(t, p, 0, 2)
	if err := p.Release(a, 1, 7, 5); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(b, 2, 7, 9); err != nil {
		t.Fatal(err)
	}
	if got, _ := p.State(a); got != StateQuarantined || p.Quarantined() != 2 || p.Held() != 0 {
		t.Fatalf("after Release: %s, quarantined %d", got, p.Quarantined())
	}
	if h, ok := p.Holder(a); !ok || h.ID != 1 {
		t.Fatalf("a quarantined address keeps its holder, got %v %v", h, ok)
	}
	if freed := p.ConfirmSync(7, 4, nil); len(freed) != 0 {
		t.Fatalf("a sync older than the release freed %v", freed)
	}
	if freed := p.ConfirmSync(8, 100, nil); len(freed) != 0 {
		t.Fatalf("another node's sync freed %v", freed)
	}
	stillA := func(x netip.Addr, holder uint64) bool { return x == a && holder == 1 }
	if freed := p.ConfirmSync(7, 5, stillA); len(freed) != 0 {
		t.Fatalf("a sync that still lists the holder freed %v", freed)
	}
	if freed := p.ConfirmSync(7, 8, nil); len(freed) != 1 || freed[0] != a {
		t.Fatalf("ConfirmSync(7, 8) freed %v, want [%s]", freed, a)
	}
	if got := p.Quarantine(7); len(got) != 1 || got[0] != (QuarantineEntry{Addr: b, Holder: 2, Seq: 9}) {
		t.Fatalf("Quarantine(7) = %v", got)
	}
	if freed := p.ExpireNode(7); len(freed) != 1 || freed[0] != b {
		t.Fatalf("ExpireNode freed %v", freed)
	}
	if p.Free() != p.Size() || len(p.QuarantineNodes()) != 0 {
		t.Fatalf("free %d of %d, nodes %v", p.Free(), p.Size(), p.QuarantineNodes())
	}
	checkPool(t, p)
}

func TestReleaseErrors(t *testing.T) {
	p := newTestPool(t, "10.0.0.0/24", 0)
	a := mustAlloc(t, p, 0, 1)
	v, _ := p.AllocateVIP(0, 50)
	tests := []struct {
		name    string
		addr    netip.Addr
		task    uint64
		wantErr []error
		msg     string
	}{
		{"wrong holder", a, 2, []error{ErrNotHeld}, "held by task 1, not task 2"},
		{"free address", mustAddr("10.0.0.100"), 1, []error{ErrNotHeld}, "is free"},
		{"reserved address", mustAddr("10.0.0.1"), 1, []error{ErrNotHeld}, "reserved"},
		{"VIP", v, 50, []error{ErrNotHeld}, "service 50 (vip)"},
		{"outside", mustAddr("10.9.0.1"), 1, []error{ErrOutsideSubnet}, ""},
	}
	for _, tt := range tests {
		for _, fn := range []func(netip.Addr, uint64) error{
			func(x netip.Addr, h uint64) error { return p.Release(x, h, 1, 1) },
			p.FreeUnassigned,
		} {
			err := fn(tt.addr, tt.task)
			for _, want := range tt.wantErr {
				if !errors.Is(err, want) || !strings.Contains(err.Error(), tt.msg) {
					t.Errorf("%s: %v, want %v containing %q", tt.name, err, want, tt.msg)
				}
			}
		}
	}
	if err := p.Release(a, 1, 1, 1); err != nil {
		t.Fatal(err)
	}
	err := p.Release(a, 1, 1, 2)
	if !errors.Is(err, ErrNotHeld) || !errors.Is(err, ErrQuarantined) {
		t.Fatalf("second Release = %v, want ErrNotHeld and ErrQuarantined", err)
	}
	if err := p.FreeUnassigned(a, 1); !errors.Is(err, ErrQuarantined) {
		t.Fatalf("FreeUnassigned of a quarantined address = %v", err)
	}
	checkPool(t, p)
}

func TestVIPs(t *testing.T) {
	p := newTestPool(t, "10.0.0.0/24", 0)
	v1, err := p.AllocateVIP(0, 9)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AllocateVIPAddr(0, mustAddr("10.0.0.200"), 9); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AllocateVIP(0, 0); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("AllocateVIP(service 0) = %v", err)
	}
	if h, _ := p.Holder(v1); h != (Holder{KindVIP, 9}) || h.String() != "service 9 (vip)" {
		t.Fatalf("Holder(VIP) = %v", h)
	}
	if got := p.VIPs(9); len(got) != 2 || got[0] != v1 || got[1] != mustAddr("10.0.0.200") {
		t.Fatalf("VIPs(9) = %v", got)
	}
	if freed := p.ReleaseVIP(9); len(freed) != 2 || p.Held() != 0 || len(p.VIPs(9)) != 0 {
		t.Fatalf("ReleaseVIP freed %v, held %d", freed, p.Held())
	}
	if freed := p.ReleaseVIP(9); freed != nil {
		t.Fatalf("second ReleaseVIP freed %v", freed)
	}
	checkPool(t, p)
}

func TestHolderAndStateStrings(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{KindTask.String(), "task"}, {KindVIP.String(), "vip"}, {Kind(9).String(), "Kind(9)"},
		{StateFree.String(), "free"}, {StateHeld.String(), "held"}, {StateQuarantined.String(), "quarantined"},
		{StateReserved.String(), "reserved"}, {State(0).String(), "State(0)"},
		{Holder{KindTask, 4}.String(), "task 4"},
		{Range{mustAddr("10.0.0.1"), mustAddr("10.0.0.2")}.String(), "10.0.0.1-10.0.0.2"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestCloneIsDeepAndEqual(t *testing.T) {
	p, err := New(Config{Name: "net", Subnet: netip.MustParsePrefix("10.0.0.0/24"), BlockSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.LeaseBlock(1); err != nil {
		t.Fatal(err)
	}
	a, _ := p.Allocate(1, 7)
	b, _ := p.Allocate(1, 8)
	if _, err := p.AllocateVIP(1, 3); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(a, 7, 1, 5); err != nil {
		t.Fatal(err)
	}
	c := p.Clone()
	want, _ := p.MarshalBinary()
	got, _ := c.MarshalBinary()
	if !bytes.Equal(want, got) {
		t.Fatal("clone encodes differently from the original")
	}
	if err := c.Release(b, 8, 1, 6); err != nil {
		t.Fatal(err)
	}
	c.ConfirmSync(1, 10, nil)
	if again, _ := p.MarshalBinary(); !bytes.Equal(want, again) {
		t.Fatal("changing the clone changed the original")
	}
	if err := c.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
