package wire

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestCursorTokenRoundTrip: every cursor's token parses back to the cursor,
// and is URL-safe; AppendToken appends it.
func TestCursorTokenRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawCursor(t)
		tok := c.Token()
		if strings.ContainsAny(tok, "+/=%?&") {
			t.Fatalf("token %q is not URL-safe", tok)
		}
		got, err := ParseCursor(tok)
		if err != nil || !slices.Equal(got, c) || (len(c) == 0) != (tok == "") {
			t.Fatalf("%v → %q → %v, %v", c, tok, got, err)
		}
		if app := string(c.AppendToken([]byte("x"))); app != "x"+tok {
			t.Fatalf("%v: AppendToken appended %q, Token is %q", c, app, tok)
		}
	})
}

// TestCursorOrder: Merge is the per-group maximum, no input has passed its
// merge, and Passed agrees with a naive per-group comparison.
func TestCursorOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := drawCursor(t), drawCursor(t)
		m := a.Merge(b)
		if a.Passed(m) || b.Passed(m) {
			t.Fatalf("%v or %v passed their merge %v", a, b, m)
		}
		for g := range max(len(a), len(b)) + 1 {
			if m.Get(g) != max(a.Get(g), b.Get(g)) {
				t.Fatalf("merge %v of %v and %v at group %d", m, a, b, g)
			}
		}
		naive := false
		for g := range len(a) + len(b) {
			naive = naive || a.Get(g) > b.Get(g)
		}
		if a.Passed(b) != naive {
			t.Fatalf("%v.Passed(%v) = %v", a, b, !naive)
		}
	})
}

func TestCursorBasics(t *testing.T) {
	if c, err := ParseCursor(""); c != nil || err != nil {
		t.Errorf(`ParseCursor("") = %v, %v`, c, err)
	}
	if Cursor(nil).Token() != "" || Cursor(nil).Merge(nil) != nil || Cursor(nil).Get(-1) != 0 {
		t.Error("empty cursor")
	}
	if Cursor([]uint64{0, 0}).Passed(nil) || !Cursor([]uint64{0, 1}).Passed(Cursor{5}) {
		t.Error("missing parts do not count as 0")
	}
	merged := Cursor{1, 9}.Merge(Cursor{4})
	if !slices.Equal(merged, Cursor{4, 9}) {
		t.Errorf("merge %v", merged)
	}
	for _, bad := range []string{"!", "AQ", "Ag", "AYAA", "AZAA", "AQEC=", "AQEC+", strings.Repeat("A", 1<<20)} {
		_, err := ParseCursor(bad)
		if !errors.Is(err, ErrBadCursor) || !strings.Contains(err.Error(), "is not valid") {
			t.Errorf("ParseCursor(%.20q) = %v", bad, err)
		}
	}
}
