package check

import (
	"strconv"
	"testing"

	"pgregory.net/rapid"
)

// An address's number stands for its addrKey string: two addresses get
// one number exactly when their strings are equal, and the number names
// the string back — for canonical IPv4 addresses, other spellings of them
// (leading zeros, out of range, parts missing or extra), IPv6 and odd
// strings, with and without a prefix length, on several networks.
func TestAddrIDsAreTheKeys(t *testing.T) {
	part := rapid.OneOf(
		rapid.Map(rapid.IntRange(0, 255), strconv.Itoa),
		rapid.SampledFrom([]string{"00", "01", "007", "256", "999", "1000", "", "-1", "a", "4294967296"}),
	)
	addr := rapid.OneOf(
		rapid.Custom(func(t *rapid.T) string {
			n := rapid.IntRange(3, 5).Draw(t, "parts")
			s := ""
			for i := range n {
				if i > 0 {
					s += rapid.SampledFrom([]string{".", ".", ".", ":", ".."}).Draw(t, "sep")
				}
				s += part.Draw(t, "part")
			}
			return s
		}),
		rapid.SampledFrom([]string{"fd00::1", "fd00::01", "::", "10.0.0.1 ", " 10.0.0.1", "10.0.0.1.", ".10.0.0.1", "x"}),
		rapid.String(),
	)
	withPrefix := rapid.Custom(func(t *rapid.T) string {
		a := addr.Draw(t, "addr")
		if rapid.Bool().Draw(t, "prefix") {
			a += "/" + strconv.Itoa(rapid.IntRange(0, 32).Draw(t, "len"))
		}
		return a
	})
	network := rapid.SampledFrom([]string{"net0", "net1", "net 1", "", "net-99"})
	rapid.Check(t, func(t *rapid.T) {
		var tab addrTable
		type pair struct{ net, addr string }
		ps := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) pair {
			return pair{network.Draw(t, "net"), withPrefix.Draw(t, "a")}
		}), 1, 20).Draw(t, "addresses")
		ids := make([]addrID, len(ps))
		for i, p := range ps {
			ids[i] = tab.id(p.net, p.addr)
			if got, want := tab.name(ids[i]), addrKey(p.net, p.addr); got != want {
				t.Fatalf("%q on %q is named %q, its key is %q", p.addr, p.net, got, want)
			}
		}
		for i := range ps {
			for j := range ps {
				if (ids[i] == ids[j]) != (addrKey(ps[i].net, ps[i].addr) == addrKey(ps[j].net, ps[j].addr)) {
					t.Fatalf("%q on %q and %q on %q: numbers %x, %x", ps[i].addr, ps[i].net, ps[j].addr, ps[j].net, ids[i], ids[j])
				}
			}
		}
	})
}
