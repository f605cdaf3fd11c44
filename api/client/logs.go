package client

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"shoal/internal/jsoncodec"
	"shoal/wire"
)

// LogLine is one line of a `service logs` stream (GET
// /v1/services/NAME/logs, GET /v1/tasks/ID/logs): a line of a task's
// output (stream stdout or stderr), or a note (stream note) from the
// manager or an agent about what it cannot show (a node that is gone, lines
// dropped because the reader did not keep up, a task with no output kept).
type LogLine struct {
	Task     string    `json:"task,omitempty"`      // task ID; empty in a note about a whole node
	Name     string    `json:"name,omitempty"`      // service.slot (service.node for a global service)
	Node     uint32    `json:"node,omitempty"`      // node ID
	NodeName string    `json:"node_name,omitempty"` // the node's hostname
	Stream   string    `json:"stream"`              // stdout, stderr or note
	At       time.Time `json:"at"`                  // when the agent read the line (docs/logs.md)
	Line     string    `json:"line"`
}

// LogOptions select the lines of a log stream.
type LogOptions struct {
	Follow bool          // keep the stream open for new lines
	Tail   int           // the last Tail lines of each task; negative: all
	Since  time.Duration // only lines read at most this long ago; 0: all
}

// ServiceLogs streams the output of service name's tasks to fn until the
// stream ends (without Follow: when every node sent its lines) or ctx
// ends. target may also be a task ID (task is true).
func (c *Client) Logs(ctx context.Context, target string, task bool, o LogOptions, fn func(LogLine) error) error {
	q := url.Values{}
	if o.Follow {
		q.Set("follow", "true")
	}
	q.Set("tail", strconv.Itoa(o.Tail))
	if o.Since > 0 {
		q.Set("since", strconv.FormatInt(time.Now().Add(-o.Since).UnixNano(), 10))
	}
	path := "/v1/services/" + url.PathEscape(target) + "/logs"
	if task {
		path = "/v1/tasks/" + url.PathEscape(target) + "/logs"
	}
	resp, err := c.openStream(ctx, path+"?"+q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var l LogLine
		if err := jsoncodec.Unmarshal(sc.Bytes(), &l); err != nil {
			return fmt.Errorf("%w at %s: log line is not valid JSON: %v", ErrUnreachable, c.base, err)
		}
		if l.Stream == "" { // a keep-alive
			continue
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w at %s: the log stream broke: %v", ErrUnreachable, c.base, err)
	}
	return nil
}

// PublishLogs posts a batch of the node's task output to the manager at
// addr (the one the subscription names), taking the agent's turn for a
// short call.
func (c *AgentClient) PublishLogs(ctx context.Context, addr string, b *wire.LogBatch) (*wire.LogAck, error) {
	base, err := baseURL(addr, c.hc.TLSConfig != nil)
	if err != nil {
		return nil, err
	}
	if err := c.turn(ctx); err != nil {
		return nil, err
	}
	defer c.endTurn()
	body, err := wire.Append(nil, b)
	if err != nil {
		return nil, err
	}
	var a wire.LogAck
	return &a, c.post(ctx, base, []byte(base+"/v1/agent/logs"), body, false, &a, nil)
}
