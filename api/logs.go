package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/api/client"
	"shoal/internal/taskref"
	"shoal/manager/control"
	routing "shoal/route"
	"shoal/statemachine"
	"shoal/wire"
)

// Task output (docs/logs.md). GET /v1/services/NAME/logs and GET
// /v1/tasks/ID/logs open a log subscription on this manager (its holder):
// the broker (manager/control) buffers what the agents publish to POST
// /v1/agent/logs; the notice of the subscription goes to this manager's
// broker and, by POST /v1/logs/peer, to every other manager's, whose
// assignment polls hand it to the nodes. Nothing is committed to Raft.

// The holder's timings (renewals, giving up on a silent node) are the
// broker's: control.LogConfig's Renew and GiveUp.
const (
	// logKeepAlive is how often an idle followed stream gets a blank line
	// (so a reader that left is noticed).
	logKeepAlive = 10 * time.Second
)

// logTask is one task a stream shows, as the request resolved it.
type logTask struct {
	id       statemachine.TaskID
	name     string
	node     statemachine.NodeID
	nodeName string
	gone     string // why its node cannot send its output; "" if it can
}

func (s *Server) serviceLogs(ctx *fasthttp.RequestCtx, args []string) error {
	return s.openLogs(ctx, args[0], false)
}

func (s *Server) taskLogs(ctx *fasthttp.RequestCtx, args []string) error {
	return s.openLogs(ctx, args[0], true)
}

func (s *Server) openLogs(ctx *fasthttp.RequestCtx, target string, isTask bool) error {
	q := ctx.QueryArgs()
	follow := string(q.Peek("follow")) == "true"
	tail := int64(-1)
	if v := string(q.Peek("tail")); v != "" && v != "all" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return badRequest("?tail=%q is not a number of lines", v)
		}
		tail = n
	}
	var since int64
	if v := string(q.Peek("since")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return badRequest("?since=%q is not a time in unix nanoseconds", v)
		}
		since = n
	}
	tasks, err := s.logTasks(target, isTask)
	if err != nil {
		return err
	}
	self := s.managerAddr(s.self.ReplicaID())
	if self == "" {
		return errorf(fasthttp.StatusServiceUnavailable, client.CodeUnavailable,
			"this manager has not registered its API address with the cluster yet; retry shortly")
	}
	id := rand.Uint64() | 1
	owners := map[statemachine.TaskID]statemachine.NodeID{}
	n := control.Notice{ID: id, Publish: self, Follow: follow, Tail: tail, Since: since,
		Nodes: map[statemachine.NodeID][]statemachine.TaskID{}}
	for _, t := range tasks {
		if t.gone == "" {
			owners[t.id] = t.node
			n.Nodes[t.node] = append(n.Nodes[t.node], t.id)
		}
	}
	sub, err := s.logs.Open(id, owners, follow)
	if err != nil {
		return errorf(fasthttp.StatusServiceUnavailable, client.CodeUnavailable, "%s", err.Error())
	}
	now := s.cfg.Clock.Now()
	for _, t := range tasks {
		if t.gone != "" {
			sub.Note(t.node, t.id, t.gone, now)
		}
	}
	if len(n.Nodes) > 0 {
		if err := s.logs.PutNotice(cloneNotice(n), now); err != nil {
			sub.Close()
			return errorf(fasthttp.StatusServiceUnavailable, client.CodeUnavailable, "%s", err.Error())
		}
		go s.forwardNotice(cloneNotice(n), false)
	}
	names := map[statemachine.TaskID]logTask{}
	nodeNames := map[statemachine.NodeID]string{}
	for _, t := range tasks {
		names[t.id] = t
		nodeNames[t.node] = t.nodeName
	}
	ctx.SetContentType("application/x-ndjson")
	ctx.Response.ImmediateHeaderFlush = true
	ctx.Response.SetBodyStream(&logStream{s: s, sub: sub, notice: n, tasks: names, nodes: nodeNames,
		target: target, isTask: isTask}, -1)
	return nil
}

// logTasks resolves a service name or a task ID into the tasks whose
// output the stream shows: those that were placed on a node.
func (s *Server) logTasks(target string, isTask bool) ([]logTask, error) {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []logTask
	add := func(st *statemachine.State, t *statemachine.Task) {
		if t.Node == 0 {
			return
		}
		lt := logTask{id: t.ID, node: t.Node}
		if svc := st.Service(t.Service); svc != nil {
			slot := uint64(t.Slot)
			if slot == 0 {
				slot = uint64(t.Node)
			}
			lt.name = svc.Spec.Name + "." + strconv.FormatUint(slot, 10)
		}
		switch n := st.Node(t.Node); {
		case n == nil:
			lt.gone = fmt.Sprintf("node %d is no longer in the cluster: the output of task %s (%s) cannot be read", t.Node, lt.name, taskref.Short(uint64(t.ID)))
		case n.Status == statemachine.NodeDown:
			lt.nodeName = n.Name
			lt.gone = fmt.Sprintf("node %s is down: the output of task %s (%s) cannot be read until it is back", n.Name, lt.name, taskref.Short(uint64(t.ID)))
		default:
			lt.nodeName = n.Name
		}
		out = append(out, lt)
	}
	if isTask {
		id, err := strconv.ParseUint(target, 10, 64)
		g := int(id >> 48)
		if err != nil || g < 1 || g > s.reads.Groups() {
			return nil, notFound("task %q does not exist (task IDs are the numbers `service ps` shows)", target)
		}
		found := false
		if err := s.reads.Read(c, g, func(st *statemachine.State) {
			if t := st.Task(statemachine.TaskID(id)); t != nil {
				found = true
				add(st, t)
			}
		}); err != nil {
			return nil, fromErr(err)
		}
		if !found {
			return nil, notFound("task %s does not exist (it may have been removed after it stopped)", target)
		}
		if len(out) == 0 {
			return nil, errorf(fasthttp.StatusConflict, client.CodeConflict, "task %s was never placed on a node: it has no output", target)
		}
		return out, nil
	}
	found := false
	if err := s.reads.Read(c, s.reads.GroupOfService(target), func(st *statemachine.State) {
		svc := st.ServiceByName(target)
		if svc == nil {
			return
		}
		found = true
		for _, t := range st.AppendServiceTasks(nil, svc.ID) {
			add(st, t)
		}
	}); err != nil {
		return nil, fromErr(err)
	}
	if !found {
		return nil, notFound("service %q does not exist", target)
	}
	slices.SortFunc(out, func(a, b logTask) int { return cmp.Compare(a.id, b.id) })
	return out, nil
}

// logStream is the body of a log stream, written by the connection's
// goroutine (as the event stream is): it takes what the broker buffered,
// renews the subscription's notices, and gives up on silent nodes.
type logStream struct {
	s      *Server
	sub    *control.LogSub
	notice control.Notice
	tasks  map[statemachine.TaskID]logTask
	nodes  map[statemachine.NodeID]string
	target string // what the user asked for: a service name or a task ID
	isTask bool
}

// addNewTasks takes in a followed service's tasks placed since the
// stream began (a scale-up, an update's new tasks). It reports whether
// the notice changed.
func (ls *logStream) addNewTasks(now time.Time) bool {
	tasks, err := ls.s.logTasks(ls.target, ls.isTask)
	if err != nil {
		return false
	}
	changed := false
	for _, t := range tasks {
		if _, ok := ls.tasks[t.id]; ok {
			continue
		}
		ls.tasks[t.id] = t
		if ls.nodes[t.node] == "" {
			ls.nodes[t.node] = t.nodeName
		}
		if t.gone != "" {
			ls.sub.Note(t.node, t.id, t.gone, now)
			continue
		}
		ls.sub.AddTask(t.id, t.node)
		ls.notice.Nodes[t.node] = append(ls.notice.Nodes[t.node], t.id)
		changed = true
	}
	return changed
}

func (*logStream) Read([]byte) (int, error) {
	return 0, errors.New("api: the log stream is written with WriteTo")
}

func (*logStream) SupportsBodyWriteTo() bool { return true }

func (ls *logStream) WriteTo(w io.Writer) (int64, error) {
	s, sub := ls.s, ls.sub
	defer func() {
		sub.Close()
		s.logs.EndNotice(ls.notice.ID)
		if len(ls.notice.Nodes) > 0 {
			go s.forwardNotice(cloneNotice(ls.notice), true)
		}
	}()
	out := newJSONLines(w)
	enc, send := out.enc, out.send
	logRenew, logGiveUp := s.logs.Config().Renew, s.logs.Config().GiveUp
	start := s.cfg.Clock.Now()
	progress := start // when the last line came
	warned := map[statemachine.NodeID]bool{}
	renew := s.cfg.Clock.NewTimer(logRenew)
	defer renew.Stop()
	alive := s.cfg.Clock.NewTimer(logKeepAlive)
	defer alive.Stop()
	for {
		entries, dropped, finished := sub.Take()
		if dropped > 0 {
			_ = enc.Encode(client.LogLine{Stream: "note", At: s.cfg.Clock.Now().UTC(),
				Line: fmt.Sprintf("%d lines were dropped here: this reader did not keep up with the tasks' output", dropped)})
		}
		for _, e := range entries {
			_ = enc.Encode(ls.render(e))
		}
		if len(entries) > 0 {
			progress = s.cfg.Clock.Now()
		}
		if out.buf.Len() > 0 {
			if err := send(); err != nil {
				return out.total, err
			}
		}
		if finished {
			return out.total, nil
		}
		select {
		case <-sub.Ready():
		case <-alive.C():
			alive.Reset(logKeepAlive)
			out.buf.WriteByte('\n')
			if err := send(); err != nil {
				return out.total, err
			}
		case <-renew.C():
			renew.Reset(logRenew)
			now := s.cfg.Clock.Now()
			waiting, silent := sub.Nodes()
			if len(silent) > 0 || ls.notice.Follow && ls.addNewTasks(now) {
				ls.notice.Round++ // hand it again: to the nodes that have not answered, or with new tasks
			}
			if len(ls.notice.Nodes) > 0 && (len(waiting) > 0 || ls.notice.Follow) {
				_ = s.logs.PutNotice(cloneNotice(ls.notice), now)
				go s.forwardNotice(cloneNotice(ls.notice), false)
			}
			if now.Sub(start) < logGiveUp {
				continue
			}
			for _, n := range silent {
				if ls.notice.Follow {
					if !warned[n] {
						warned[n] = true
						_ = enc.Encode(client.LogLine{Stream: "note", Node: uint32(n), NodeName: ls.nodes[n], At: now.UTC(),
							Line: fmt.Sprintf("node %s has not answered in %v (its agent may be down or cut off); still waiting", ls.nodeName(n), logGiveUp)})
					}
					continue
				}
				sub.NodeGone(n, fmt.Sprintf("node %s did not answer in %v (its agent may be down or cut off): its tasks' output is missing here", ls.nodeName(n), logGiveUp), now)
			}
			if !ls.notice.Follow && now.Sub(progress) >= 2*logGiveUp {
				for _, n := range waiting { // began to send, then stopped
					sub.NodeGone(n, fmt.Sprintf("node %s stopped sending its tasks' output (its agent may have died or been cut off): the rest is missing here", ls.nodeName(n)), now)
				}
			}
		case <-s.closed:
			return out.total, nil
		}
	}
}

func (ls *logStream) nodeName(n statemachine.NodeID) string {
	if name := ls.nodes[n]; name != "" {
		return name
	}
	return strconv.FormatUint(uint64(n), 10)
}

func (ls *logStream) render(e control.LogEntry) client.LogLine {
	l := client.LogLine{Node: uint32(e.Node), NodeName: ls.nodes[e.Node], Stream: e.Stream.String(),
		At: time.Unix(0, e.At).UTC(), Line: e.Data}
	if e.Task != 0 {
		t := ls.tasks[e.Task]
		l.Task, l.Name = strconv.FormatUint(uint64(e.Task), 10), t.name
	}
	return l
}

// agentLogs takes a node's published lines (POST /v1/agent/logs).
func (s *Server) agentLogs(ctx *fasthttp.RequestCtx, _ []string) error {
	return s.agentHandler(func(ctx *fasthttp.RequestCtx) error {
		var b wire.LogBatch
		if e := decodeWire(ctx, &b); e != nil {
			return e
		}
		var err error
		if b.NodeID, err = s.callerNode(ctx, b.NodeID); err != nil {
			return err
		}
		stop, err := s.logs.Publish(b.NodeID, &b)
		if err != nil {
			var we *wire.Error
			if errors.As(err, &we) && we.Code == wire.CodeForbidden {
				s.metrics.denied("other_node")
			}
			return err
		}
		return s.wireReply(ctx, &wire.LogAck{Stop: stop})
	})(ctx, nil)
}

// peerNotices is the body of POST /v1/logs/peer: notices a holder puts on
// (or renews at) another manager, or ends there.
type peerNotices struct {
	Put []peerNotice `json:"put,omitempty"`
	End []uint64     `json:"end,omitempty"`
}

type peerNotice struct {
	ID      uint64     `json:"id"`
	Publish string     `json:"publish"`
	Follow  bool       `json:"follow"`
	Tail    int64      `json:"tail"`
	Since   int64      `json:"since"`
	Round   uint32     `json:"round"`
	Nodes   []peerNode `json:"nodes"`
}

type peerNode struct {
	Node  statemachine.NodeID   `json:"node"`
	Tasks []statemachine.TaskID `json:"tasks"`
}

func (s *Server) peerLogs(ctx *fasthttp.RequestCtx, _ []string) error {
	var body peerNotices
	if err := decodeJSON(ctx, &body); err != nil {
		return err
	}
	now := s.cfg.Clock.Now()
	for _, p := range body.Put {
		n := control.Notice{ID: p.ID, Publish: p.Publish, Follow: p.Follow, Tail: p.Tail, Since: p.Since, Round: p.Round,
			Nodes: map[statemachine.NodeID][]statemachine.TaskID{}}
		for _, pn := range p.Nodes {
			n.Nodes[pn.Node] = pn.Tasks
		}
		if err := s.logs.PutNotice(n, now); err != nil {
			return errorf(fasthttp.StatusServiceUnavailable, client.CodeUnavailable, "%s", err.Error())
		}
	}
	for _, id := range body.End {
		s.logs.EndNotice(id)
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
	return nil
}

// cloneNotice copies n, so that the stream may add tasks to its own copy
// while the broker and the forwarding read theirs.
func cloneNotice(n control.Notice) control.Notice {
	nodes := make(map[statemachine.NodeID][]statemachine.TaskID, len(n.Nodes))
	for node, tasks := range n.Nodes {
		nodes[node] = slices.Clone(tasks)
	}
	n.Nodes = nodes
	return n
}

// forwardNotice puts n on (or, with end, ends it at) every other manager.
// A manager it cannot reach misses it until the next renewal; its agents
// may then learn of the subscription late.
func (s *Server) forwardNotice(n control.Notice, end bool) {
	var body peerNotices
	if end {
		body.End = []uint64{n.ID}
	} else {
		p := peerNotice{ID: n.ID, Publish: n.Publish, Follow: n.Follow, Tail: n.Tail, Since: n.Since, Round: n.Round}
		for node, tasks := range n.Nodes {
			p.Nodes = append(p.Nodes, peerNode{node, tasks})
		}
		body.Put = []peerNotice{p}
	}
	raw, _ := json.Marshal(body)
	var peers []string
	_ = s.reads.ReadLocal(routing.ClusterGroup, func(st *statemachine.State) {
		for id, addr := range st.Managers() {
			if id != s.self.ReplicaID() && addr != "" {
				peers = append(peers, addr)
			}
		}
	})
	hc, scheme := s.peerClient()
	var wg sync.WaitGroup
	for _, addr := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, "POST", scheme+addr+"/v1/logs/peer", bytes.NewReader(raw))
			if err != nil {
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				s.cfg.Logf("api: a log subscription's notice did not reach the manager at %s: %v", addr, err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 300 {
				s.cfg.Logf("api: the manager at %s refused a log subscription's notice: %s", addr, resp.Status)
			}
		}()
	}
	wg.Wait()
}

// peerClient returns the client this manager talks to its peers with: TLS
// with its manager certificate when security is on.
func (s *Server) peerClient() (*http.Client, string) {
	s.peerOnce.Do(func() {
		tr := &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}
		s.peerScheme = "http://"
		if s.cfg.Security != nil && s.cfg.Security.PeerTLS != nil {
			tr.TLSClientConfig = s.cfg.Security.PeerTLS
			s.peerScheme = "https://"
		}
		s.peerHC = &http.Client{Transport: tr, Timeout: 5 * time.Second}
	})
	return s.peerHC, s.peerScheme
}
