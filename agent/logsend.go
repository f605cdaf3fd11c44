package agent

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	sm "shoal/statemachine"
	"shoal/wire"
)

// Task output on request (docs/logs.md). A manager hands the agent a log
// subscription in an assignments answer; the agent reads the output of the
// subscription's tasks from the files its executor keeps, and posts the
// lines to the manager the subscription names, in batches, until the
// lines are all sent or, when it follows, until that manager answers stop.
// It sends only output it keeps itself: its own tasks'.

// LogPublisher is a Manager that takes task output (api/client's
// AgentClient). A Manager without it never gets any.
type LogPublisher interface {
	PublishLogs(ctx context.Context, addr string, b *wire.LogBatch) (*wire.LogAck, error)
}

// OutputKeeper is an Executor that keeps each task's output in files,
// stdout and stderr (each with an older part in stdout.1, stderr.1), under
// OutputDir(task).
type OutputKeeper interface {
	OutputDir(task sm.TaskID) string
}

const (
	// logPoll is how often a followed task's files are checked for new
	// output.
	logPoll = 200 * time.Millisecond
	// logKeepAlive is how often a follower with nothing new asks the
	// manager whether the subscription still stands (an empty batch).
	logKeepAlive = 5 * time.Second
	// logBatchBytes is the most line bytes in one batch.
	logBatchBytes = 256 << 10
	// logMaxLine is the longest line sent as one; longer ones are cut.
	logMaxLine = 64 << 10
	// logMaxRunning is the most subscriptions an agent serves at once;
	// more are answered with a note.
	logMaxRunning = 64
	// logGiveUp is how long an agent keeps trying to reach the manager of
	// a subscription before it drops the subscription.
	logGiveUp = 30 * time.Second
)

// logSubs remembers the subscriptions this agent started, with the tasks
// it serves for each (a manager may hand one over again, with more tasks
// when a followed service got new ones), the newest logSeen of them.
type logSubs struct {
	mu      sync.Mutex
	seen    map[uint64]map[sm.TaskID]bool
	order   []uint64
	running int
}

const logSeen = 4096

// subscribeLogs starts serving the subscriptions it was not serving yet.
func (a *Agent) subscribeLogs(ctx context.Context, node sm.NodeID, subs []wire.LogSubscription) {
	pub, ok := a.cfg.Manager.(LogPublisher)
	if !ok {
		return
	}
	l := &a.logs
	for _, sub := range subs {
		l.mu.Lock()
		if l.seen == nil {
			l.seen = map[uint64]map[sm.TaskID]bool{}
		}
		served := l.seen[sub.ID]
		if served == nil {
			served = map[sm.TaskID]bool{}
			l.seen[sub.ID] = served
			l.order = append(l.order, sub.ID)
			if len(l.order) > logSeen {
				delete(l.seen, l.order[0])
				l.order = l.order[1:]
			}
		}
		var fresh []sm.TaskID // tasks not served yet for this subscription
		for _, t := range sub.Tasks {
			if !served[t] {
				served[t] = true
				fresh = append(fresh, t)
			}
		}
		if len(fresh) == 0 {
			l.mu.Unlock()
			continue
		}
		sub.Tasks = fresh
		busy := l.running >= logMaxRunning
		if !busy {
			l.running++
		}
		l.mu.Unlock()
		go func() {
			if busy {
				r := &logRun{a: a, pub: pub, node: node, sub: sub}
				r.note(sub.Tasks, "this node serves as many log readers as it may; try again later")
				r.send(ctx, true)
				return
			}
			defer func() {
				l.mu.Lock()
				l.running--
				l.mu.Unlock()
			}()
			a.serveLogs(ctx, pub, node, sub)
		}()
	}
}

// logRun is one subscription being served.
type logRun struct {
	a       *Agent
	pub     LogPublisher
	node    sm.NodeID
	sub     wire.LogSubscription
	pending []wire.LogLine
	size    int
}

func (r *logRun) add(l wire.LogLine) {
	r.pending = append(r.pending, l)
	r.size += len(l.Data)
}

func (r *logRun) note(tasks []sm.TaskID, msg string) {
	for _, t := range tasks {
		r.add(wire.LogLine{Task: t, Stream: wire.LogNote, At: r.a.cfg.Clock.Now().UnixNano(), Data: msg})
	}
}

// send posts what is pending, in batches of at most logBatchBytes; done
// marks the last. It reports false when the subscription is over: the
// manager said stop, refused the batch, or could not be reached for
// logGiveUp.
func (r *logRun) send(ctx context.Context, done bool) bool {
	for first := true; first || len(r.pending) > 0; first = false {
		n, size := 0, 0
		for n < len(r.pending) && (n == 0 || size+len(r.pending[n].Data) <= logBatchBytes) {
			size += len(r.pending[n].Data)
			n++
		}
		b := &wire.LogBatch{NodeID: r.node, Sub: r.sub.ID, Lines: r.pending[:n], Done: done && n == len(r.pending)}
		if !r.post(ctx, b) {
			return false
		}
		r.pending = r.pending[n:]
		r.size -= size
	}
	r.pending = nil
	return true
}

func (r *logRun) post(ctx context.Context, b *wire.LogBatch) bool {
	giveUp := r.a.cfg.Clock.Now().Add(logGiveUp)
	wait := 200 * time.Millisecond
	for {
		c, cancel := r.a.callCtx(ctx, r.a.cfg.CallTimeout)
		ack, err := r.pub.PublishLogs(c, r.sub.Publish, b)
		cancel()
		switch {
		case err == nil:
			return !ack.Stop
		case ctx.Err() != nil:
			return false
		case code(err) != "" && code(err) != wire.CodeUnavailable && code(err) != wire.CodeBusy:
			r.a.cfg.Logger.Warn("agent: the manager refused task output", "subscription", r.sub.ID, "err", err)
			return false
		case r.a.cfg.Clock.Now().After(giveUp):
			r.a.cfg.Logger.Warn("agent: cannot reach the manager that asked for task output; giving up", "manager", r.sub.Publish, "err", err)
			return false
		}
		if !r.a.sleep(ctx, nil, wait) {
			return false
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// serveLogs sends the subscription's lines: what the files hold now
// (the last Tail lines of each stream, read at or after Since), then, when
// it follows, new lines as they come.
func (a *Agent) serveLogs(ctx context.Context, pub LogPublisher, node sm.NodeID, sub wire.LogSubscription) {
	r := &logRun{a: a, pub: pub, node: node, sub: sub}
	keeper, _ := a.cfg.Executor.(OutputKeeper)
	var follows []*outputFile
	for _, t := range sub.Tasks {
		if keeper == nil {
			r.note([]sm.TaskID{t}, "this agent keeps no output of its tasks")
			continue
		}
		dir := keeper.OutputDir(t)
		if _, err := os.Stat(dir); err != nil {
			r.note([]sm.TaskID{t}, "no output of this task is kept on its node (its files are gone)")
			continue
		}
		for _, s := range []wire.LogStream{wire.LogStdout, wire.LogStderr} {
			f := &outputFile{task: t, stream: s, path: filepath.Join(dir, s.String())}
			for _, l := range f.history(sub.Tail, sub.Since) {
				r.add(l)
			}
			follows = append(follows, f)
		}
	}
	if !sub.Follow {
		r.send(ctx, true)
		return
	}
	if !r.send(ctx, false) { // also tells the manager this node answered
		return
	}
	tick := a.cfg.Clock.NewTimer(logPoll)
	defer tick.Stop()
	lastSent := a.cfg.Clock.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
			tick.Reset(logPoll)
		}
		now := a.cfg.Clock.Now()
		for _, f := range follows {
			for _, l := range f.follow(now) {
				r.add(l)
			}
		}
		if len(r.pending) == 0 && now.Sub(lastSent) < logKeepAlive {
			continue
		}
		if !r.send(ctx, false) {
			return
		}
		lastSent = now
	}
}

// outputFile is one stream of one task's output, read from its files.
type outputFile struct {
	task    sm.TaskID
	stream  wire.LogStream
	path    string
	off     int64     // how much of the current file was read
	partial []byte    // a last line without its newline yet
	since   time.Time // when partial began to wait
}

// history returns the file's lines as they are now (the older part in
// path.1 first): the last tail of them (negative: all), from files
// modified at or after since (unix ns). A line's time is its file's
// modification time. It leaves f at the end, to follow from.
func (f *outputFile) history(tail, since int64) []wire.LogLine {
	var out []wire.LogLine
	for _, p := range []string{f.path + ".1", f.path} {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if p == f.path {
			f.off = int64(len(data))
		}
		if fi.ModTime().UnixNano() < since {
			continue
		}
		at := fi.ModTime().UnixNano()
		out = append(out, f.lines(data, at)...)
	}
	if tail >= 0 && int64(len(out)) > tail {
		out = out[int64(len(out))-tail:]
	}
	return out
}

// follow returns the lines written since the last read. A line still
// without its newline after a second is sent as it is. A file that
// shrank was rotated (its content moved to path.1): it is read again from
// its start.
func (f *outputFile) follow(now time.Time) []wire.LogLine {
	var out []wire.LogLine
	fh, err := os.Open(f.path)
	if err == nil {
		if fi, err := fh.Stat(); err == nil {
			if fi.Size() < f.off {
				f.off = 0
			}
			if fi.Size() > f.off {
				data := make([]byte, fi.Size()-f.off)
				n, _ := fh.ReadAt(data, f.off)
				f.off += int64(n)
				data = data[:n]
				if len(f.partial) > 0 {
					data = append(f.partial, data...)
					f.partial = nil
				}
				if i := bytes.LastIndexByte(data, '\n'); i < len(data)-1 {
					f.partial = append([]byte(nil), data[i+1:]...)
					f.since = now
					data = data[:i+1]
				}
				out = f.lines(data, now.UnixNano())
			}
		}
		fh.Close()
	}
	if len(f.partial) > 0 && now.Sub(f.since) >= time.Second {
		out = append(out, f.lines(f.partial, now.UnixNano())...)
		f.partial = nil
	}
	return out
}

// lines splits data into lines without their newlines, cutting lines
// longer than logMaxLine.
func (f *outputFile) lines(data []byte, at int64) []wire.LogLine {
	var out []wire.LogLine
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		var line []byte
		if i < 0 {
			line, data = data, nil
		} else {
			line, data = data[:i], data[i+1:]
		}
		for len(line) > logMaxLine {
			out = append(out, wire.LogLine{Task: f.task, Stream: f.stream, At: at, Data: string(line[:logMaxLine])})
			line = line[logMaxLine:]
		}
		out = append(out, wire.LogLine{Task: f.task, Stream: f.stream, At: at, Data: string(line)})
	}
	return out
}
