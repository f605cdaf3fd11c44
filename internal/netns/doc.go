// Package netns makes a small network of hosts on one Linux machine for
// tests that cut links: each host is a network namespace with one veth
// interface (eth0) on a bridge in the root namespace, and commands run on a
// host with `ip netns exec`. Links are cut with tc: a u32 filter on the
// ingress of a host's veth in the root namespace (where the host's packets
// enter the bridge) redirects the packets for a peer to a veth that is
// down, which drops them silently (no reset, no ICMP), as a host that
// vanished or a firewall's DROP would. The kernels this runs on have
// neither netem nor the gact drop action, and the machines no iptables;
// mirred redirection needs neither.
//
// The drop is outside the sending host's stack on purpose. A filter on the
// host's own eth0 drops inside its qdisc layer, which its TCP takes for
// local congestion: it sends zero-window probes instead of retransmitting
// and aborts the connection after tcp_retries2 probes (about 9 s), where a
// real network keeps it open, retransmitting with back-off, for many
// minutes.
//
// Contract:
//   - Every name a network makes (namespaces, bridge, veths, the sink) starts with
//     its prefix, "shn" + the creating process's ID in base 36 + "-" +
//     three random hex digits, so concurrent runs never share a name, and
//     Create removes what a run that was killed left (prefixes whose
//     process no longer exists), with the processes still running in its
//     namespaces. It touches no name outside that pattern.
//   - A network's subnet is a random private /24 (10.0.0.0/8, second
//     octet 100 to 249) that no route of the root namespace overlaps. The
//     bridge holds .1, so the calling process (in the root namespace)
//     reaches every host at its address; host i holds .(i+2). Traffic goes
//     only to addresses of the network itself.
//   - Cut, CutOneWay and Isolate drop packets between hosts, never between
//     a host and the bridge: the test process keeps talking to a host that
//     is cut off from the others. Heal removes every drop.
//   - Close kills every process in the network's namespaces, then removes
//     them and the bridge. New (for tests) registers Close with t.Cleanup,
//     so a failed test leaves nothing; a test binary killed outright leaves
//     names the next Create removes.
//   - Where namespaces cannot be made (not root, no ip or tc binary, no
//     veth or bridge support) Check says why in one line, and New skips
//     the test with that line.
package netns
