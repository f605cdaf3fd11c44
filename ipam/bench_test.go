package ipam

import (
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// fragment holds every other address of p (the even offsets), the worst
// layout for run-length compression of the free and held sets.
func fragment(tb testing.TB, p *Pool) {
	tb.Helper()
	for off := uint32(2); off < p.size-1; off += 2 {
		if p.reserved.Contains(off) {
			continue
		}
		if err := p.AllocateAddr(0, p.addr(off), uint64(off)); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkAllocateRelease measures the steady-state cost of one address's
// trip: Allocate, Release into quarantine, and the ConfirmSync that frees it,
// in batches of 256, reporting nanoseconds per address for each.
func BenchmarkAllocateRelease(b *testing.B) {
	const batch = 256
	for _, size := range []struct {
		name string
		cidr string
	}{{"slash16", "10.0.0.0/16"}, {"slash8", "10.0.0.0/8"}} {
		for _, layout := range []string{"fresh", "fragmented"} {
			b.Run(size.name+"/"+layout, func(b *testing.B) {
				p, err := New(Config{Subnet: netip.MustParsePrefix(size.cidr)})
				if err != nil {
					b.Fatal(err)
				}
				if layout == "fragmented" {
					fragment(b, p)
				}
				addrs := make([]netip.Addr, batch)
				var tAlloc, tRelease, tConfirm time.Duration
				var seq uint64
				task := uint64(1 << 40)
				n := 0
				b.ReportAllocs()
				for b.Loop() {
					t0 := time.Now()
					for i := range addrs {
						task++
						a, err := p.Allocate(0, task)
						if err != nil {
							b.Fatal(err)
						}
						addrs[i] = a
					}
					t1 := time.Now()
					seq++
					task -= batch
					for _, a := range addrs {
						task++
						if err := p.Release(a, task, 1, seq); err != nil {
							b.Fatal(err)
						}
					}
					t2 := time.Now()
					if freed := p.ConfirmSync(1, seq, nil); len(freed) != batch {
						b.Fatalf("confirm freed %d", len(freed))
					}
					t3 := time.Now()
					tAlloc += t1.Sub(t0)
					tRelease += t2.Sub(t1)
					tConfirm += t3.Sub(t2)
					n += batch
				}
				b.ReportMetric(float64(tAlloc.Nanoseconds())/float64(n), "ns/alloc")
				b.ReportMetric(float64(tRelease.Nanoseconds())/float64(n), "ns/release")
				b.ReportMetric(float64(tConfirm.Nanoseconds())/float64(n), "ns/confirm")
			})
		}
	}
}

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkFragmentedSlash8Memory reports the heap held by a /8 pool with
// every other address held (8,388,607 holders).
func BenchmarkFragmentedSlash8Memory(b *testing.B) {
	var bytes, held float64
	for b.Loop() {
		before := heapInUse()
		p, err := New(Config{Subnet: netip.MustParsePrefix("10.0.0.0/8")})
		if err != nil {
			b.Fatal(err)
		}
		fragment(b, p)
		bytes = float64(heapInUse() - before)
		held = float64(p.Held())
		runtime.KeepAlive(p)
	}
	b.ReportMetric(bytes, "bytes/pool")
	b.ReportMetric(bytes/held, "bytes/held-addr")
}

// BenchmarkMarshalFragmentedSlash16 measures encoding and decoding a /16
// with every other address held.
func BenchmarkMarshalFragmentedSlash16(b *testing.B) {
	p, _ := New(Config{Subnet: netip.MustParsePrefix("10.0.0.0/16")})
	fragment(b, p)
	var size int
	for b.Loop() {
		enc, err := p.MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		var q Pool
		if err := q.UnmarshalBinary(enc); err != nil {
			b.Fatal(err)
		}
		size = len(enc)
	}
	b.ReportMetric(float64(size), "bytes/encoding")
}

// TestHotPathAllocations guards the steady state of Allocate, Release and
// FreeUnassigned against per-call heap allocation.
func TestHotPathAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation guard")
	}
	p := newTestPool(t, "10.0.0.0/16", 0)
	// A realistic pool is never empty: keep some held and quarantined
	// addresses so that bitmap containers are not dropped and recreated.
	for i := range uint64(100) {
		a := mustAlloc(t, p, 0, 1<<40+i)
		if i%2 == 0 {
			if err := p.Release(a, 1<<40+i, 2, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	task := uint64(0)
	avg := testing.AllocsPerRun(20000, func() {
		task++
		a, err := p.Allocate(0, task)
		if err != nil {
			t.Fatal(err)
		}
		if task%2 == 0 {
			if err := p.FreeUnassigned(a, task); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := p.Release(a, task, 1, task); err != nil {
			t.Fatal(err)
		}
		if task%64 == 1 {
			p.ExpireNode(1)
		}
	})
	if avg > 0.1 {
		t.Fatalf("%.3f allocations per Allocate+release, want about 0", avg)
	}
}

// BenchmarkLeaseBlocks leases every block of a /16 (1,024 blocks of 64) to
// eight owners and releases them again, as service groups lease blocks of
// a network while their tasks are created and give back the empty ones;
// ns/block is one lease and one release.
func BenchmarkLeaseBlocks(b *testing.B) {
	p, err := New(Config{Subnet: netip.MustParsePrefix("10.0.0.0/16")})
	if err != nil {
		b.Fatal(err)
	}
	blocks := make([]BlockID, 0, p.NumBlocks())
	b.ReportAllocs()
	for b.Loop() {
		blocks = blocks[:0]
		for i := 0; ; i++ {
			bl, err := p.LeaseBlock(uint32(i%8 + 1))
			if err != nil {
				break
			}
			blocks = append(blocks, bl)
		}
		if len(blocks) != p.NumBlocks() {
			b.Fatalf("leased %d of %d blocks", len(blocks), p.NumBlocks())
		}
		for _, bl := range blocks {
			owner, _ := p.BlockOwner(bl)
			if err := p.ReleaseBlock(owner, bl); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*p.NumBlocks()), "ns/block")
}

// BenchmarkHeapPerPool reports the heap one group's copy of a loadgen
// network holds: a /14 (the 1M/10k ramp's 100 networks of 10,000 tasks
// over eight service groups, with headroom) cut into blocks of 64, of
// X
// replica keeps one such pool per network and group (1,000 of them).
func BenchmarkHeapPerPool(b *testing.B) {
	const pools, tasks = 50, 1250
	var bytes float64
	for b.Loop() {
		before := heapInUse()
		ps := make([]*Pool, pools)
		for i := range ps {
			p, err := New(Config{Subnet: netip.MustParsePrefix("10.0.0.0/14"), BlockSize: 64})
			if err != nil {
				b.Fatal(err)
			}
			for t := range tasks {
				if !p.HasFree(1) {
					if _, err := p.LeaseBlock(1); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := p.Allocate(1, uint64(t+1)); err != nil {
					b.Fatal(err)
				}
			}
			ps[i] = p
		}
		bytes = float64(heapInUse()-before) / pools
		runtime.KeepAlive(ps)
	}
	b.ReportMetric(bytes, "heap-bytes/pool")
}
