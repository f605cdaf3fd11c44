package api

import (
	"context"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/api/client"
	"shoal/manager/control"
	"shoal/statemachine"
	"shoal/wire"
)

// logsServer serves the API over one state holding service web with a
// task on node 1 (ready) and one on node 2 (down), on a loopback port.
func logsServer(t *testing.T, bounds control.LogConfig) (*Server, string, [2]statemachine.TaskID) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	st, apply := stateApplier(t)
	apply(statemachine.Command{Kind: statemachine.CmdSetManager, Seq: 1, Name: addr})
	for i := uint32(1); i <= 2; i++ {
		apply(statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: &statemachine.Node{ID: statemachine.NodeID(i),
			Name: fmt.Sprintf("n%d", i), CPU: 4000, Memory: 1 << 33}})
	}
	apply(statemachine.Command{Kind: statemachine.CmdCreateService, Spec: &statemachine.ServiceSpec{Name: "web", Replicas: 2, Command: []string{"x"}}})
	ids := st.TaskIDs()
	for i, id := range ids {
		apply(statemachine.Command{Kind: statemachine.CmdAssign, Task: id, Node: statemachine.NodeID(i + 1)})
	}
	apply(statemachine.Command{Kind: statemachine.CmdSetNodeStatus, Node: 2, NodeStatus: statemachine.NodeDown})
	r := &replica{st: st, leader: 1}
	s, err := New(Config{Reads: r, Leaders: r, Self: r, Replicas: r, Stats: r, ToGroup: r, Submitter: r,
		Feed: control.NewFeed(1, nil, 16, 16), Logs: bounds})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(smallSends{ln}) }()
	t.Cleanup(func() { s.Close() })
	return s, addr, [2]statemachine.TaskID{ids[0], ids[1]}
}

// smallSends gives every connection it accepts a small send buffer, so
// that what the server holds for a reader that does not read is not
// hidden in the kernel's buffers.
type smallSends struct{ net.Listener }

func (l smallSends) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// takeNotices waits until node has n subscriptions to be handed.
func takeNotices(t *testing.T, s *Server, node statemachine.NodeID, n int) []wire.LogSubscription {
	t.Helper()
	var subs []wire.LogSubscription
	deadline := time.Now().Add(5 * time.Second)
	for len(subs) < n {
		select {
		case <-s.logs.NoticeWake(node):
		case <-time.After(time.Until(deadline)):
			t.Fatalf("%d of %d subscriptions reached node %d", len(subs), n, node)
		}
		subs = append(subs, s.logs.TakeNotices(node, time.Now())...)
	}
	return subs
}

// A task whose node is down: the stream says so at once, and shows the
// other node's lines, which that node publishes to the manager the
// subscription names.
func TestLogsOfATaskWhoseNodeIsGone(t *testing.T) {
	s, addr, tasks := logsServer(t, control.LogConfig{})
	c, _ := client.New(addr)
	got := make(chan []client.LogLine, 1)
	go func() {
		var lines []client.LogLine
		err := c.Logs(context.Background(), "web", false, client.LogOptions{Tail: -1}, func(l client.LogLine) error {
			lines = append(lines, l)
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		got <- lines
	}()
	subs := takeNotices(t, s, 1, 1)
	if subs[0].Publish != addr || len(subs[0].Tasks) != 1 || subs[0].Tasks[0] != tasks[0] || subs[0].Tail != -1 {
		t.Fatalf("node 1 was handed %+v", subs[0])
	}
	if s.logs.HasNotices(2, time.Now()) {
		t.Fatal("the down node was handed the subscription")
	}
	ac, _ := client.NewAgentClient([]string{addr}, nil)
	ack, err := ac.PublishLogs(context.Background(), subs[0].Publish, &wire.LogBatch{NodeID: 1, Sub: subs[0].ID, Done: true,
		Lines: []wire.LogLine{{Task: tasks[0], Stream: wire.LogStdout, At: 1, Data: "hello"}}})
	if err != nil || ack.Stop {
		t.Fatalf("publish: %+v %v", ack, err)
	}
	var lines []client.LogLine
	select {
	case lines = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end once every node was done")
	}
	text := fmt.Sprintf("%+v", lines)
	if len(lines) != 2 || !strings.Contains(text, "n2 is down") || lines[1].Line != "hello" || lines[1].Name != "web.1" || lines[1].NodeName != "n1" {
		t.Fatalf("stream: %s; want a note that n2 is down, then web.1's line from n1", text)
	}
	// The subscription is over: a late batch is told to stop.
	if ack, err := ac.PublishLogs(context.Background(), addr, &wire.LogBatch{NodeID: 1, Sub: subs[0].ID}); err != nil || !ack.Stop {
		t.Fatalf("late publish: %+v %v; want stop", ack, err)
	}
}

// A hundred followers over HTTP that never read: the node's publishing
// never waits on them (each batch is answered at once), the manager
// buffers at most its bound for all, and a reader is told that lines were
// dropped.
func TestLogsFollowersThatNeverRead(t *testing.T) {
	bounds := control.LogConfig{PerSubscription: 16 << 10, Total: 512 << 10}
	s, addr, tasks := logsServer(t, bounds)
	const followers = 100
	// Small receive buffers, so that what the manager holds for them is
	// not hidden in the kernel's.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	var conns []net.Conn
	for range followers {
		conn, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "GET /v1/services/web/logs?follow=true&tail=-1 HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
	}
	subs := takeNotices(t, s, 1, followers)
	ac, _ := client.NewAgentClient([]string{addr}, nil)
	line := strings.Repeat("y", 200)
	var slowest time.Duration
	peak := 0
	for round := range 20 {
		for _, sub := range subs {
			b := &wire.LogBatch{NodeID: 1, Sub: sub.ID}
			for i := range 50 {
				b.Lines = append(b.Lines, wire.LogLine{Task: tasks[0], Stream: wire.LogStdout, Data: fmt.Sprint(round, i, line)})
			}
			start := time.Now()
			ack, err := ac.PublishLogs(context.Background(), addr, b)
			slowest = max(slowest, time.Since(start))
			if err != nil || ack.Stop {
				t.Fatalf("publish: %+v %v", ack, err)
			}
			peak = max(peak, s.logs.Buffered())
			if got := s.logs.Buffered(); got > bounds.Total {
				t.Fatalf("%d bytes buffered, over the bound of %d", got, bounds.Total)
			}
		}
	}
	t.Logf("%d followers that never read, %d lines of 200 bytes published for each (about %d MB in all): slowest publish %s, at most %d bytes buffered (bound %d)",
		followers, 20*50, followers*20*50*200>>20, slowest.Round(time.Microsecond), peak, bounds.Total)
	if peak < bounds.Total/2 {
		t.Fatalf("at most %d bytes were buffered: the followers took the lines (the test does not test the bound)", peak)
	}
	if slowest > time.Second {
		t.Fatalf("a publish took %s: followers that do not read slow the agents down", slowest)
	}
	// A follower that reads at last is told what it lost.
	_ = conns[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	var seen []byte
	buf := make([]byte, 64<<10)
	for !strings.Contains(string(seen), "lines were dropped here: this reader did not keep up") {
		n, err := conns[0].Read(buf)
		if err != nil {
			t.Fatalf("the follower was not told that lines were dropped: %v (read %d bytes)", err, len(seen))
		}
		seen = append(seen[max(0, len(seen)-256):], buf[:n]...)
	}
}

// A notice handed to a node whose answer was lost (the node never
// publishes) is handed to it again at the next renewal; a node that never
// answers is named in a note and the stream ends without it.
func TestLogsNoticeHandedAgainThenNodeGivenUp(t *testing.T) {
	s, addr, _ := logsServer(t, control.LogConfig{Renew: 50 * time.Millisecond, GiveUp: 300 * time.Millisecond})
	c, _ := client.New(addr)
	got := make(chan []client.LogLine, 1)
	go func() {
		var lines []client.LogLine
		_ = c.Logs(context.Background(), "web", false, client.LogOptions{Tail: -1}, func(l client.LogLine) error {
			lines = append(lines, l)
			return nil
		})
		got <- lines
	}()
	first := takeNotices(t, s, 1, 1)[0] // and the answer carrying it is lost
	again := takeNotices(t, s, 1, 1)[0]
	if again.ID != first.ID {
		t.Fatalf("handed %d, then %d; want the same subscription again", first.ID, again.ID)
	}
	select {
	case lines := <-got:
		if len(lines) != 2 || !strings.Contains(lines[0].Line, "n2 is down") || !strings.Contains(lines[1].Line, "n1 did not answer") {
			t.Fatalf("stream: %+v; want a note that n2 is down, then one that n1 did not answer", lines)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end without the silent node")
	}
}
