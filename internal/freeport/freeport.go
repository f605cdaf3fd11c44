package freeport

import (
	"fmt"
	"net"
	"sync"
)

// listenFunc opens a listener on a free loopback port; tests replace it.
type listenFunc func() (net.Listener, error)

func listenLoopback() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// picker remembers every address it has handed out.
type picker struct {
	mu     sync.Mutex
	listen listenFunc
	given  map[string]bool
}

var process = &picker{listen: listenLoopback, given: map[string]bool{}}

// Addr returns one free loopback address ("127.0.0.1:port").
func Addr() (string, error) {
	a, err := Addrs(1)
	if err != nil {
		return "", err
	}
	return a[0], nil
}

// Addrs returns n distinct free loopback addresses, none handed out before
// in this process.
func Addrs(n int) ([]string, error) { return process.addrs(n) }

// tries bounds the listens per address, so a kernel that keeps offering
// ports already handed out ends in an error rather than a loop.
const tries = 64

func (p *picker) addrs(n int) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	out := make([]string, 0, n)
	for range n {
		addr, err := p.one(&held)
		if err != nil {
			return nil, err
		}
		out = append(out, addr)
	}
	for _, a := range out {
		p.given[a] = true
	}
	return out, nil
}

// one listens until it gets an address not handed out before; every
// listener it opens stays in held until the call ends.
func (p *picker) one(held *[]net.Listener) (string, error) {
	for range tries {
		l, err := p.listen()
		if err != nil {
			return "", fmt.Errorf("find a free loopback port: %w", err)
		}
		*held = append(*held, l)
		if a := l.Addr().String(); !p.given[a] {
			return a, nil
		}
	}
	return "", fmt.Errorf("find a free loopback port: %d ports offered were all handed out before", tries)
}
