package freeport

import (
	"fmt"
	"net"
	"testing"
)

// reusingKernel offers the lowest port not open at the moment, the way a
// kernel may hand a just-closed port to the next caller.
type reusingKernel struct{ open map[int]bool }

type fakeListener struct {
	k    *reusingKernel
	port int
}

func (l *fakeListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (l *fakeListener) Close() error              { delete(l.k.open, l.port); return nil }
func (l *fakeListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: l.port}
}

func (k *reusingKernel) listen() (net.Listener, error) {
	for p := 40000; ; p++ {
		if !k.open[p] {
			k.open[p] = true
			return &fakeListener{k: k, port: p}, nil
		}
	}
}

// Property: however calls of Addr and Addrs are mixed, no address is
// handed out twice, even by a kernel that reuses every closed port at once.
func TestNoAddressIsHandedOutTwice(t *testing.T) {
	k := &reusingKernel{open: map[int]bool{}}
	p := &picker{listen: k.listen, given: map[string]bool{}}
	seen := map[string]int{}
	for call := range 20 {
		addrs, err := p.addrs(1 + call%4)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if prev, ok := seen[a]; ok {
				t.Fatalf("call %d handed out %s, already handed out by call %d", call, a, prev)
			}
			seen[a] = call
		}
	}
	if len(k.open) != 0 {
		t.Fatalf("%d listeners left open", len(k.open))
	}
}

func TestAKernelThatOnlyOffersUsedPortsEndsInAnError(t *testing.T) {
	p := &picker{given: map[string]bool{"127.0.0.1:40000": true}}
	p.listen = func() (net.Listener, error) {
		return &fakeListener{k: &reusingKernel{open: map[int]bool{}}, port: 40000}, nil
	}
	if _, err := p.addrs(1); err == nil {
		t.Fatal("no error from a kernel that offers only a port handed out before")
	}
}

// On the real kernel: the addresses are distinct and each can be listened on.
func TestRealAddressesCanBeListenedOn(t *testing.T) {
	addrs, err := Addrs(30)
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[string]bool{}
	for _, a := range addrs {
		distinct[a] = true
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("listen on %s: %v", a, err)
		}
		l.Close()
	}
	if len(distinct) != len(addrs) {
		t.Fatal(fmt.Sprint("repeated addresses: ", addrs))
	}
}
