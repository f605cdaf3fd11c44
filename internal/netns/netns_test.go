package netns

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// reach dials h's echo listener from `from` (nil: the root namespace) and
// says whether one byte went there and back within the timeout.
func reach(t *testing.T, from *Host, to string) bool {
	t.Helper()
	const timeout = 500 * time.Millisecond
	var c net.Conn
	var err error
	if from == nil {
		c, err = net.DialTimeout("tcp", to, timeout)
	} else {
		c, err = from.DialTimeout("tcp", to, timeout)
	}
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return false
		}
		t.Fatalf("dial %s: %v (a cut drops silently: only a timeout is expected)", to, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte{7}); err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	_, err = io.ReadFull(c, b[:])
	return err == nil
}

// echo serves one-byte echoes on h at port 9 until the test ends.
func echo(t *testing.T, h *Host) string {
	t.Helper()
	l, err := h.Listen("tcp", h.Addr.String()+":9")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return l.Addr().String()
}

// TestCuts: hosts reach each other and the root namespace; Cut, CutOneWay
// and Isolate drop exactly the packets they say (the root namespace still
// reaches a cut-off host), an established connection goes silent rather
// than reset, Heal restores everything, and Close leaves no name behind.
func TestCuts(t *testing.T) {
	n := New(t, 3)
	a, b, c := n.Hosts[0], n.Hosts[1], n.Hosts[2]
	ea, eb := echo(t, a), echo(t, b)
	want := func(from *Host, to string, ok bool) {
		t.Helper()
		if got := reach(t, from, to); got != ok {
			name := "root"
			if from != nil {
				name = from.Name
			}
			t.Fatalf("%s → %s: reached %v, want %v", name, to, got, ok)
		}
	}
	want(nil, ea, true)
	want(b, ea, true)
	want(c, ea, true)

	// An open connection through the cut: writes are not answered, and
	// not refused either.
	open, err := b.DialTimeout("tcp", ea, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()

	if err := n.Cut(a, b); err != nil {
		t.Fatal(err)
	}
	want(b, ea, false)
	want(a, eb, false)
	want(c, ea, true)
	want(nil, ea, true)
	_ = open.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := open.Write([]byte{1}); err != nil {
		t.Fatalf("write through a cut: %v (want it accepted and never answered)", err)
	}
	var buf [1]byte
	if _, err := open.Read(buf[:]); err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read through a cut: %v, want a timeout", err)
	}

	// The connection outlives a cut of 12 s, as over a real network: a
	// drop inside the sender's own stack made its TCP abort it after about
	// 9 s of zero-window probes.
	<-time.After(12 * time.Second)
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	want(b, ea, true)
	want(a, eb, true)
	// The byte sent during the cut arrives once TCP retransmits it.
	_ = open.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := open.Read(buf[:]); err != nil || buf[0] != 1 {
		t.Fatalf("after the heal: %v %v, want the byte sent during the cut", buf, err)
	}

	// One way: b's packets for a are dropped, a's for b pass; a TCP
	// connection needs both, so neither side connects, but c's do.
	if err := n.CutOneWay(b, a); err != nil {
		t.Fatal(err)
	}
	want(b, ea, false)
	want(a, eb, false)
	want(c, eb, true)
	want(c, ea, true)
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}

	if err := n.Isolate(c); err != nil {
		t.Fatal(err)
	}
	want(c, ea, false)
	want(c, eb, false)
	want(b, ea, true)
	want(nil, ea, true)
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	want(c, ea, true)

	// A process started on a host runs in its namespace.
	out, err := a.Command("ip", "-4", "-o", "addr", "show", "dev", "eth0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), a.Addr.String()+"/24") {
		t.Fatalf("ip addr on %s: %v\n%s", a.Name, err, out)
	}

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if left := names(t, n.Prefix); left != "" {
		t.Fatalf("after Close: %s", left)
	}
}

// TestRemoveStale: the names of a network whose process is gone are
// removed, with the processes running in its namespaces; a live run's are
// not.
func TestRemoveStale(t *testing.T) {
	live := New(t, 1)
	// A process that exits at once: its ID is a dead run's.
	p := exec.Command("true")
	if err := p.Run(); err != nil {
		t.Fatal(err)
	}
	dead, err := create(2, fmt.Sprintf("shn%s-abc", strconv.FormatInt(int64(p.Process.Pid), 36)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dead.Close() })
	sleeper := dead.Hosts[1].Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = sleeper.Wait(); close(exited) }()
	if names(t, dead.Prefix) == "" {
		t.Fatal("the network under a dead process's prefix was not made")
	}

	RemoveStale()
	if left := names(t, dead.Prefix); left != "" {
		t.Fatalf("a dead run's names are left:\n%s", left)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the process in the dead run's namespace still runs 10s after RemoveStale")
	}
	if names(t, live.Prefix) == "" {
		t.Fatal("RemoveStale removed a live run's network")
	}
}

// names lists the namespaces and links whose names start with prefix.
func names(t *testing.T, prefix string) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{{"netns", "list"}, {"-o", "link", "show"}} {
		out, err := exec.Command("ip", args...).Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, prefix) {
				b.WriteString(line + "\n")
			}
		}
	}
	return b.String()
}
