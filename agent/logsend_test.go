package agent

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"shoal/wire"
)

func lineTexts(ls []wire.LogLine) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Data)
	}
	return out
}

// A task's stream is read from its older part, then its current file;
// --tail keeps the last lines of both; a file modified before --since is
// left out; following picks up appended lines, holds a line without its
// newline for a second, and starts over on a file that was rotated.
func TestOutputFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "stdout")
	write := func(p, s string, flag int) {
		f, err := os.OpenFile(p, flag|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(s)
		f.Close()
	}
	write(path+".1", "a\nb\n", os.O_TRUNC)
	write(path, "c\nd\ne\n", os.O_TRUNC)
	old := time.Now().Add(-time.Hour)
	_ = os.Chtimes(path+".1", old, old)

	f := &outputFile{task: 7, stream: wire.LogStdout, path: path}
	if got := lineTexts(f.history(-1, 0)); !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
		t.Fatalf("all: %q", got)
	}
	f = &outputFile{task: 7, stream: wire.LogStdout, path: path}
	if got := lineTexts(f.history(4, 0)); !slices.Equal(got, []string{"b", "c", "d", "e"}) {
		t.Fatalf("tail 4: %q", got)
	}
	f = &outputFile{task: 7, stream: wire.LogStdout, path: path}
	if got := lineTexts(f.history(-1, time.Now().Add(-time.Minute).UnixNano())); !slices.Equal(got, []string{"c", "d", "e"}) {
		t.Fatalf("since a minute ago: %q (the older part was last written an hour ago)", got)
	}
	now := time.Now()
	write(path, "f\ng", os.O_APPEND)
	if got := lineTexts(f.follow(now)); !slices.Equal(got, []string{"f"}) {
		t.Fatalf("follow: %q; want the whole line only", got)
	}
	if got := f.follow(now.Add(500 * time.Millisecond)); len(got) != 0 {
		t.Fatalf("a line without its newline went after half a second: %q", lineTexts(got))
	}
	write(path, "h\n", os.O_APPEND)
	if got := lineTexts(f.follow(now.Add(600 * time.Millisecond))); !slices.Equal(got, []string{"gh"}) {
		t.Fatalf("follow: %q; want the line completed", got)
	}
	write(path, "tail", os.O_APPEND)
	f.follow(now.Add(700 * time.Millisecond))
	if got := lineTexts(f.follow(now.Add(1800 * time.Millisecond))); !slices.Equal(got, []string{"tail"}) {
		t.Fatalf("a line without its newline after a second: %q", got)
	}
	write(path, "x\n", os.O_TRUNC) // rotated: shorter than what was read
	if got := lineTexts(f.follow(now.Add(2 * time.Second))); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("after a rotation: %q", got)
	}
}
