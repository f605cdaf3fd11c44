package ipam

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestNewConfig(t *testing.T) {
	pfx := netip.MustParsePrefix
	tests := []struct {
		name      string
		cfg       Config
		wantErr   error
		msg       string // substring of the error message
		size      int    // usable addresses
		blocks    int
		blockSize int
	}{
		{name: "/30 has one usable address", cfg: Config{Subnet: pfx("10.0.0.0/30")}, size: 1, blocks: 1, blockSize: 4},
		{name: "/24 default blocks", cfg: Config{Subnet: pfx("10.0.0.0/24")}, size: 253, blocks: 4, blockSize: 64},
		{name: "/8", cfg: Config{Subnet: pfx("10.0.0.0/8"), BlockSize: 256}, size: 1<<24 - 3, blocks: 1 << 16, blockSize: 256},
		{name: "block size capped to subnet", cfg: Config{Subnet: pfx("10.0.0.0/24"), BlockSize: 1 << 20}, size: 253, blocks: 1, blockSize: 256},
		{name: "reserved range", cfg: Config{Subnet: pfx("10.0.0.0/24"), Reserved: []Range{{mustAddr("10.0.0.10"), mustAddr("10.0.0.19")}}}, size: 243, blocks: 4, blockSize: 64},
		{name: "overlapping reserved ranges merge", cfg: Config{Subnet: pfx("10.0.0.0/24"), Reserved: []Range{
			{mustAddr("10.0.0.15"), mustAddr("10.0.0.25")}, {mustAddr("10.0.0.10"), mustAddr("10.0.0.19")}, {mustAddr("10.0.0.1"), mustAddr("10.0.0.1")}}},
			size: 237, blocks: 4, blockSize: 64},
		{name: "custom gateway", cfg: Config{Subnet: pfx("10.0.0.0/24"), Gateway: mustAddr("10.0.0.254")}, size: 253, blocks: 4, blockSize: 64},

		{name: "/31 rejected", cfg: Config{Subnet: pfx("10.0.0.0/31")}, wantErr: ErrInvalidCIDR, msg: "use /30 or larger"},
		{name: "/32 rejected", cfg: Config{Subnet: pfx("10.0.0.1/32")}, wantErr: ErrInvalidCIDR, msg: "too small"},
		{name: "/7 rejected", cfg: Config{Subnet: pfx("10.0.0.0/7")}, wantErr: ErrInvalidCIDR, msg: "use /8 or smaller"},
		{name: "IPv6 rejected", cfg: Config{Subnet: pfx("2001:db8::/64")}, wantErr: ErrInvalidCIDR, msg: "IPv6"},
		{name: "IPv4-mapped IPv6 rejected", cfg: Config{Subnet: pfx("::ffff:10.0.0.0/120")}, wantErr: ErrInvalidCIDR, msg: "IPv6"},
		{name: "host bits set", cfg: Config{Subnet: pfx("10.0.0.5/24")}, wantErr: ErrInvalidCIDR, msg: "did you mean 10.0.0.0/24"},
		{name: "zero prefix", cfg: Config{}, wantErr: ErrInvalidCIDR, msg: "not a valid prefix"},
		{name: "reserved outside", cfg: Config{Subnet: pfx("10.0.0.0/24"), Reserved: []Range{{mustAddr("10.0.0.250"), mustAddr("10.0.1.3")}}},
			wantErr: ErrOutsideSubnet, msg: "reserved range end 10.0.1.3"},
		{name: "reserved IPv6", cfg: Config{Subnet: pfx("10.0.0.0/24"), Reserved: []Range{{mustAddr("::1"), mustAddr("::2")}}}, wantErr: ErrOutsideSubnet},
		{name: "reserved reversed", cfg: Config{Subnet: pfx("10.0.0.0/24"), Reserved: []Range{{mustAddr("10.0.0.9"), mustAddr("10.0.0.3")}}},
			wantErr: ErrInvalidConfig, msg: "ends before it starts"},
		{name: "reserved covers everything", cfg: Config{Subnet: pfx("10.0.0.0/30"), Reserved: []Range{{mustAddr("10.0.0.2"), mustAddr("10.0.0.2")}}},
			wantErr: ErrInvalidConfig, msg: "cover all"},
		{name: "gateway outside", cfg: Config{Subnet: pfx("10.0.0.0/24"), Gateway: mustAddr("10.0.1.1")}, wantErr: ErrOutsideSubnet, msg: "gateway"},
		{name: "gateway is network", cfg: Config{Subnet: pfx("10.0.0.0/24"), Gateway: mustAddr("10.0.0.0")}, wantErr: ErrInvalidConfig},
		{name: "gateway is broadcast", cfg: Config{Subnet: pfx("10.0.0.0/24"), Gateway: mustAddr("10.0.0.255")}, wantErr: ErrInvalidConfig},
		{name: "block size not a power of two", cfg: Config{Subnet: pfx("10.0.0.0/24"), BlockSize: 48}, wantErr: ErrInvalidConfig, msg: "power of two"},
		{name: "block size not a power of two, small", cfg: Config{Subnet: pfx("10.0.0.0/24"), BlockSize: 3}, wantErr: ErrInvalidConfig},
		{name: "name too long", cfg: Config{Subnet: pfx("10.0.0.0/24"), Name: strings.Repeat("n", MaxNameLen+1)}, wantErr: ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.cfg)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("New() error = %v, want %v containing %q", err, tt.wantErr, tt.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("New() error = %v", err)
			}
			if p.Size() != tt.size || p.Free() != tt.size || p.NumBlocks() != tt.blocks || p.BlockSize() != tt.blockSize {
				t.Fatalf("size %d free %d blocks %d×%d, want %d, %d×%d", p.Size(), p.Free(), p.NumBlocks(), p.BlockSize(), tt.size, tt.blocks, tt.blockSize)
			}
			if err := p.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
			again, err := New(p.Config())
			if err != nil || again.Size() != p.Size() {
				t.Fatalf("normalised config does not rebuild the pool: %v", err)
			}
		})
	}
}

func TestReservedAddressesAreReserved(t *testing.T) {
	p, err := New(Config{Subnet: netip.MustParsePrefix("10.0.0.0/24"), Gateway: mustAddr("10.0.0.254"),
		Reserved: []Range{{mustAddr("10.0.0.10"), mustAddr("10.0.0.12")}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr string
		want State
	}{
		{"10.0.0.0", StateReserved}, {"10.0.0.255", StateReserved}, {"10.0.0.254", StateReserved},
		{"10.0.0.10", StateReserved}, {"10.0.0.12", StateReserved}, {"10.0.0.1", StateFree}, {"10.0.0.13", StateFree},
	} {
		if got, _ := p.State(mustAddr(tc.addr)); got != tc.want {
			t.Errorf("State(%s) = %s, want %s", tc.addr, got, tc.want)
		}
	}
	if _, err := p.State(mustAddr("10.0.1.0")); !errors.Is(err, ErrOutsideSubnet) {
		t.Errorf("State outside = %v, want ErrOutsideSubnet", err)
	}
	// With a custom gateway the first usable address is allocated first.
	if a, err := p.Allocate(0, 1); err != nil || a != mustAddr("10.0.0.1") {
		t.Fatalf("first Allocate = %s, %v, want 10.0.0.1", a, err)
	}
}

func TestCheckOverlap(t *testing.T) {
	existing := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("192.168.1.0/24"), {}}
	tests := []struct {
		next    string
		wantErr error
		msg     string
	}{
		{"10.1.0.0/16", nil, ""},
		{"192.168.2.0/24", nil, ""},
		{"10.0.5.0/24", ErrOverlap, "overlaps existing network 10.0.0.0/16"},
		{"10.0.0.0/8", ErrOverlap, "10.0.0.0/16"},
		{"192.168.1.0/24", ErrOverlap, "192.168.1.0/24"},
		{"192.168.1.128/31", ErrInvalidCIDR, "too small"},
		{"fd00::/64", ErrInvalidCIDR, "IPv6"},
	}
	for _, tt := range tests {
		err := CheckOverlap(existing, netip.MustParsePrefix(tt.next))
		if tt.wantErr == nil && err != nil || tt.wantErr != nil && (!errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.msg)) {
			t.Errorf("CheckOverlap(%s) = %v, want %v containing %q", tt.next, err, tt.wantErr, tt.msg)
		}
	}
}
