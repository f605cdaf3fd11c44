package procstat

import (
	"math"
	"os"
	"testing"
)

func TestParse(t *testing.T) {
	// A command name with spaces and parentheses: fields are counted after
	// the last ')'.
	line := []byte("4242 (shoal (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 567 0 0 20 0 9 0 987654 3133440 357 18446744073709551615 0 0")
	st, err := Parse(line)
	if err != nil || st.State != 'S' || st.Pgrp != 4242 || st.UTime != 1234 || st.STime != 567 || st.StartTime != 987654 {
		t.Fatalf("%+v %v", st, err)
	}
	if s := st.CPUSeconds(); math.Abs(s-18.01) > 1e-9 {
		t.Fatalf("CPU %v s, want 18.01", s)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1", "4242 (short) S 1 2",
		"1 (x) SS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
		"1 (x) S 1 2 3 4 5 6 7 8 9 10 -11 12 13 14 15 16 17 18 19 20"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestRead(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	st, err := Read("/proc", os.Getpid())
	if err != nil || st.StartTime == 0 || st.State == 0 {
		t.Fatalf("%+v %v", st, err)
	}
	if _, err := Read("/proc", 1<<30); err == nil {
		t.Fatal("a process that does not exist was read")
	}
}
