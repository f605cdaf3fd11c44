package netns

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ErrUnsupported wraps the reason this machine cannot make namespaces.
var ErrUnsupported = errors.New("cannot make network namespaces here")

// maxHosts keeps every interface name within the kernel's 15 characters.
const maxHosts = 100

// Net is a bridge and its hosts.
type Net struct {
	// Prefix starts every name the network made.
	Prefix string
	// Subnet is the network's /24; Bridge is the root namespace's address
	// on it (the test process's).
	Subnet netip.Prefix
	Bridge netip.Addr
	Hosts  []*Host

	bridge string
	sink   string // a veth that is down: what is redirected to it is dropped
	mu     sync.Mutex
	drops  map[[2]int]bool // {from, to}: from's packets for to are dropped
	closed bool
}

// Host is one network namespace on the bridge.
type Host struct {
	// Name is the namespace's name (ip netns); Addr its address.
	Name  string
	Index int
	Addr  netip.Addr
	veth  string // the root namespace's end of its link
}

// Check says why namespaces cannot be made here, or nil.
func Check() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: network namespaces need root (euid %d)", ErrUnsupported, os.Geteuid())
	}
	for _, bin := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%w: no %s binary (iproute2)", ErrUnsupported, bin)
		}
	}
	return nil
}

// New is Create for a test: it skips the test with one line where
// namespaces cannot be made, and removes the network when the test ends,
// failed or not.
func New(t testing.TB, hosts int) *Net {
	t.Helper()
	if err := Check(); err != nil {
		t.Skip(err.Error())
	}
	n, err := Create(hosts)
	if errors.Is(err, ErrUnsupported) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("netns: %v", err)
		}
	})
	return n
}

// namePat matches the names networks make; group 1 is the creating
// process's ID in base 36.
var namePat = regexp.MustCompile(`^shn([0-9a-z]+)-[0-9a-f]{3}`)

// Create makes a bridge with hosts namespaces on it, first removing what
// killed runs left.
func Create(hosts int) (*Net, error) {
	if hosts < 1 || hosts > maxHosts {
		return nil, fmt.Errorf("netns: %d hosts: want 1 to %d", hosts, maxHosts)
	}
	if err := Check(); err != nil {
		return nil, err
	}
	RemoveStale()
	return create(hosts, fmt.Sprintf("shn%s-%03x", strconv.FormatInt(int64(os.Getpid()), 36), rand.IntN(0x1000)))
}

// create makes the network under prefix.
func create(hosts int, prefix string) (*Net, error) {
	n := &Net{Prefix: prefix, drops: map[[2]int]bool{}}
	n.bridge = n.Prefix + "br"
	subnet, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	n.Subnet = subnet
	base := subnet.Addr().As4()
	at := func(last int) netip.Addr {
		a := base
		a[3] = byte(last)
		return netip.AddrFrom4(a)
	}
	n.Bridge = at(1)
	if err := run("ip", "link", "add", n.bridge, "type", "bridge"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	fail := func(err error) (*Net, error) {
		_ = n.Close()
		return nil, err
	}
	n.sink = n.Prefix + "d"
	if err := runAll(
		[]string{"ip", "addr", "add", n.Bridge.String() + "/24", "dev", n.bridge},
		[]string{"ip", "link", "set", n.bridge, "up"},
		// The sink: a veth left down. Packets redirected to it are
		// dropped.
		[]string{"ip", "link", "add", n.sink, "type", "veth", "peer", "name", n.Prefix + "e"},
	); err != nil {
		return fail(err)
	}
	for i := range hosts {
		h := &Host{Name: fmt.Sprintf("%sh%d", n.Prefix, i), Index: i, Addr: at(i + 2), veth: fmt.Sprintf("%sv%d", n.Prefix, i)}
		if err := run("ip", "netns", "add", h.Name); err != nil {
			return fail(fmt.Errorf("%w: %v", ErrUnsupported, err))
		}
		n.Hosts = append(n.Hosts, h)
		if err := runAll(
			[]string{"ip", "link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.Name},
			[]string{"ip", "link", "set", h.veth, "master", n.bridge, "up"},
			[]string{"ip", "-n", h.Name, "link", "set", "lo", "up"},
			[]string{"ip", "-n", h.Name, "addr", "add", h.Addr.String() + "/24", "dev", "eth0"},
			[]string{"ip", "-n", h.Name, "link", "set", "eth0", "up"},
			[]string{"tc", "qdisc", "add", "dev", h.veth, "clsact"},
		); err != nil {
			return fail(err)
		}
	}
	return n, nil
}

// freeSubnet picks a random 10.x.y.0/24 that no route or address of the
// root namespace overlaps.
func freeSubnet() (netip.Prefix, error) {
	out, err := output("ip", "-4", "route", "show", "table", "all")
	if err != nil {
		return netip.Prefix{}, err
	}
	addrs, err := output("ip", "-4", "-o", "addr", "show")
	if err != nil {
		return netip.Prefix{}, err
	}
	var used []netip.Prefix
	for _, f := range strings.Fields(out + " " + addrs) {
		if p, err := netip.ParsePrefix(f); err == nil {
			used = append(used, p.Masked())
		} else if a, err := netip.ParseAddr(f); err == nil && a.Is4() {
			used = append(used, netip.PrefixFrom(a, 32))
		}
	}
	for range 100 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + rand.IntN(150)), byte(rand.IntN(256)), 0}), 24)
		if !slices.ContainsFunc(used, p.Overlaps) {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("netns: no free 10.x.y.0/24 in 100 tries")
}

// Command returns a command that runs on h (ip netns exec, which execs it:
// the command's process is the one started).
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.Name, name}, args...)...)
}

// Do runs fn on an OS thread that has entered h's namespace: a socket fn
// opens belongs to h (and keeps working from any goroutine after). The
// thread ends with fn; it never returns to the runtime's pool.
func (h *Host) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		f, err := os.Open("/run/netns/" + h.Name)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("netns: enter %s: %v", h.Name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// Listen opens a listener on h.
func (h *Host) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := h.Do(func() (err error) { l, err = net.Listen(network, addr); return err })
	return l, err
}

// DialTimeout dials from h.
func (h *Host) DialTimeout(network, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := h.Do(func() (err error) { c, err = net.DialTimeout(network, addr, timeout); return err })
	return c, err
}

// Pids lists the processes running on h.
func (h *Host) Pids() []int { return nsPids(h.Name) }

// Cut drops every packet between a and b, both ways.
func (n *Net) Cut(a, b *Host) error {
	return n.change(func() { n.drops[[2]int{a.Index, b.Index}], n.drops[[2]int{b.Index, a.Index}] = true, true })
}

// CutOneWay drops from's packets for to; to's packets still reach from.
func (n *Net) CutOneWay(from, to *Host) error {
	return n.change(func() { n.drops[[2]int{from.Index, to.Index}] = true })
}

// Isolate cuts a from every other host (not from the bridge).
func (n *Net) Isolate(a *Host) error {
	return n.change(func() {
		for _, b := range n.Hosts {
			if b != a {
				n.drops[[2]int{a.Index, b.Index}], n.drops[[2]int{b.Index, a.Index}] = true, true
			}
		}
	})
}

// Heal removes every drop.
func (n *Net) Heal() error { return n.change(func() { clear(n.drops) }) }

// change applies edit to the drop set and rewrites the filters of the
// hosts whose drops changed: a host that only gains drops gets the new
// filters added; one that loses any has its filters replaced.
func (n *Net) change(edit func()) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("netns: the network is closed")
	}
	before := n.targets()
	edit()
	after := n.targets()
	var errs []error
	for _, h := range n.Hosts {
		was, now := before[h.Index], after[h.Index]
		if slices.Equal(was, now) {
			continue
		}
		add := now
		if slices.ContainsFunc(was, func(to int) bool { return !slices.Contains(now, to) }) {
			if len(was) > 0 {
				errs = append(errs, run("tc", "filter", "del", "dev", h.veth, "ingress"))
			}
		} else {
			add = slices.DeleteFunc(slices.Clone(now), func(to int) bool { return slices.Contains(was, to) })
		}
		for _, to := range add {
			errs = append(errs, run("tc", "filter", "add", "dev", h.veth, "ingress",
				"protocol", "ip", "prio", "1", "u32", "match", "ip", "dst", n.Hosts[to].Addr.String()+"/32",
				"action", "mirred", "egress", "redirect", "dev", n.sink))
		}
	}
	return errors.Join(errs...)
}

// targets lists, per host index, the hosts its packets are dropped for.
func (n *Net) targets() map[int][]int {
	m := map[int][]int{}
	for d, on := range n.drops {
		if on {
			m[d[0]] = append(m[d[0]], d[1])
		}
	}
	for _, v := range m {
		slices.Sort(v)
	}
	return m
}

// Close kills every process on the hosts and removes the namespaces and
// the bridge.
func (n *Net) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	var errs []error
	for _, h := range n.Hosts {
		errs = append(errs, removeNS(h.Name))
		_ = exec.Command("ip", "link", "del", h.veth).Run() // gone with the namespace, unless a process held it
	}
	errs = append(errs, run("ip", "link", "del", n.bridge))
	if n.sink != "" {
		_ = exec.Command("ip", "link", "del", n.sink).Run()
	}
	return errors.Join(errs...)
}

// removeNS kills the processes in a namespace, waits for them to exit,
// and deletes it.
func removeNS(name string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := nsPids(name)
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netns: processes %v in %s outlived SIGKILL for 10s", pids, name)
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond) // the kernel reaps them; nothing to wait on
	}
	return run("ip", "netns", "del", name)
}

func nsPids(name string) []int {
	out, err := output("ip", "netns", "pids", name)
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(out) {
		if p, err := strconv.Atoi(f); err == nil && p != os.Getpid() {
			pids = append(pids, p)
		}
	}
	return pids
}

// RemoveStale removes the namespaces and links of networks whose creating
// process no longer runs (a test binary that was killed), with the
// processes left in them.
func RemoveStale() {
	stale := func(name string) bool {
		m := namePat.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, err := strconv.ParseInt(m[1], 36, 64)
		if err != nil || int(pid) == os.Getpid() {
			return false
		}
		_, err = os.Stat(fmt.Sprintf("/proc/%d", pid))
		return errors.Is(err, os.ErrNotExist)
	}
	if out, err := output("ip", "netns", "list"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 0 && stale(f[0]) {
				_ = removeNS(f[0])
			}
		}
	}
	if out, err := output("ip", "-o", "link", "show"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if stale(name) {
				_ = exec.Command("ip", "link", "del", name).Run()
			}
		}
	}
}

func run(name string, args ...string) error {
	_, err := output(name, args...)
	return err
}

func runAll(cmds ...[]string) error {
	for _, c := range cmds {
		if err := run(c[0], c[1:]...); err != nil {
			return err
		}
	}
	return nil
}

func output(name string, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("netns: %s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}
