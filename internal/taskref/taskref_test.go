package taskref

import (
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// serviceTaskIDs are the IDs a group mints for a service's n tasks: the
// group in the top 16 bits, a counter from 1 below (statemachine's
// newTask).
func serviceTaskIDs(group, n uint64) []uint64 {
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = group<<48 | uint64(i+1)
	}
	return ids
}

// 100,000 tasks of one service print 100,000 different short IDs, and each
// short ID, typed back, matches its own task and no other.
func TestHundredThousandTasksOfOneServiceResolveBack(t *testing.T) {
	ids := serviceTaskIDs(7, 100_000)
	type printed struct {
		short string
		id    uint64
	}
	all := make([]printed, len(ids))
	for i, id := range ids {
		all[i] = printed{Short(id), id}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].short < all[j].short })
	for i := 1; i < len(all); i++ {
		if all[i].short == all[i-1].short {
			t.Fatalf("tasks %d and %d both print %s", all[i-1].id, all[i].id, all[i].short)
		}
	}
	for _, p := range all {
		pre, err := ParsePrefix(p.short)
		if err != nil {
			t.Fatal(err)
		}
		// The tasks whose printed form begins with the typed text, found
		// in the sorted table by string comparison (the reference); Match
		// must agree with it on each of them and on their neighbours.
		lo := sort.Search(len(all), func(i int) bool { return all[i].short >= p.short })
		hi := sort.Search(len(all), func(i int) bool { return all[i].short > p.short+"~" })
		if hi-lo != 1 || all[lo].id != p.id {
			t.Fatalf("%s matches %d tasks", p.short, hi-lo)
		}
		for i := max(lo-1, 0); i < min(hi+1, len(all)); i++ {
			if got := pre.Match(all[i].id); got != (all[i].id == p.id) {
				t.Fatalf("%s: Match(%d) = %v", p.short, all[i].id, got)
			}
		}
	}
}

// Match agrees with the string-prefix reference for prefixes of every
// length, either case, against IDs of their own and of other tasks.
func TestPrefixMatchesItsPrintedForms(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		id, other := r.Uint64(), r.Uint64()
		if r.IntN(2) == 0 {
			other = id&^0xffff | uint64(r.IntN(0x10000)) // a task of the same group
		}
		full := Format(id)
		typed := full[:1+r.IntN(FullLen)]
		if r.IntN(2) == 0 {
			typed = strings.ToUpper(typed)
		}
		p, err := ParsePrefix(typed)
		if err != nil {
			t.Fatalf("%s: %v", typed, err)
		}
		if !p.Match(id) {
			t.Fatalf("%s does not match %s", typed, full)
		}
		want := strings.HasPrefix(Format(other), strings.ToLower(typed))
		if p.Match(other) != want {
			t.Fatalf("%s matches %s: %v, want %v", typed, Format(other), !want, want)
		}
	}
}

// The decimal ID of the API matches its task alone; the whole printed
// form does too.
func TestWholeFormsMatchOneTask(t *testing.T) {
	id := uint64(5)<<48 | 42
	for _, typed := range []string{strconv.FormatUint(id, 10), Format(id)} {
		p, err := ParsePrefix(typed)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Match(id) || p.Match(id+1) || p.Match(id-1) {
			t.Fatalf("%s: matches %v, neighbours %v %v", typed, p.Match(id), p.Match(id+1), p.Match(id-1))
		}
	}
	if len(Format(id)) != FullLen || len(Short(id)) != ShortLen || !strings.HasPrefix(Format(id), Short(id)) {
		t.Fatalf("Format %s, Short %s", Format(id), Short(id))
	}
}

func TestParsePrefixRefusesWhatNoIDIs(t *testing.T) {
	for _, typed := range []string{"", "abc-1", "web.1", "0123456789abz", "12345678901234x", "oil"} {
		if _, err := ParsePrefix(typed); err == nil {
			t.Errorf("%q parsed", typed)
		} else if strings.Contains(err.Error(), "taskref") {
			t.Errorf("%q: %v", typed, err)
		}
	}
}
