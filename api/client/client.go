package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"shoal/internal/jsoncodec"
)

// APIError is a manager's refusal of a user API request.
type APIError struct {
	Status int
	ErrorBody
}

func (e *APIError) Error() string { return e.ErrorBody.Error }

// Is matches another *APIError by code.
func (e *APIError) Is(target error) bool {
	t, ok := target.(*APIError)
	return ok && t.Code == e.Code
}

// ErrUnreachable wraps every transport failure: the manager could not be
// reached or answered with something that is not the API.
var ErrUnreachable = errors.New("cannot reach the manager")

// Client talks to one manager's user API.
type Client struct {
	base string
	hc   *http.Client
	// OnResend, if set, hears each time a write is sent again because
	// its outcome was unknown (see write).
	OnResend func(requestID string, why error)
	// Consistent makes every read linearizable (?consistent=true): the
	// manager answers only once it applied everything committed when the
	// read arrived, and 503 without a quorum. Default: the answering
	// replica's state as applied (its staleness in X-Shoal-Last-Contact).
	Consistent bool
	// DecodeEvent, if set, decodes each line of Events into a zero ev in
	// place of the JSON codec, with the codec's outcome (a reader of a
	// busy stream may parse the lines the server writes in a fixed shape
	// itself, and leave the rest to jsoncodec.Unmarshal).
	DecodeEvent func(line []byte, ev *Event) error
	// DecodeTasks, if set, decodes the body of each Tasks answer into a
	// zero l in place of the JSON codec, with the codec's outcome (a
	// reader of the whole task list may parse the pages the server
	// writes in a fixed shape itself).
	DecodeTasks func(body []byte, l *List[Task]) error
}

// BaseURL turns host:port or http(s)://host:port into a base URL (http
// unless said).
func BaseURL(addr string) (string, error) { return baseURL(addr, false) }

// baseURL is BaseURL with https as the default scheme when secure.
func baseURL(addr string, secure bool) (string, error) {
	if addr == "" {
		return "", errors.New("no manager address: pass --addr or set SHOAL_ADDR (host:port)")
	}
	if !strings.Contains(addr, "://") {
		if secure {
			addr = "https://" + addr
		} else {
			addr = "http://" + addr
		}
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("manager address %q is not host:port or http(s)://host:port", addr)
	}
	return strings.TrimRight(u.Scheme+"://"+u.Host, "/"), nil
}

// New returns a client of the manager at addr over plain HTTP.
func New(addr string) (*Client, error) { return NewTLS(addr, nil) }

// NewTLS returns a client of the manager at addr that speaks TLS with cfg
// (an addr without a scheme means https); nil cfg means plain HTTP.
func NewTLS(addr string, cfg *tls.Config) (*Client, error) {
	base, err := baseURL(addr, cfg != nil)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{}
	if cfg != nil {
		hc.Transport = &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: false, MaxIdleConnsPerHost: 16}
	}
	return &Client{base: base, hc: hc}, nil
}

// Addr returns the manager's base URL.
func (c *Client) Addr() string { return c.base }

// Query is a read's options: a blocking read waits until the state passes
// Index (an X-Shoal-Index token) or Wait ends.
type Query struct {
	Index string
	Wait  time.Duration
	// Params are extra query parameters (filters, pagination).
	Params url.Values
}

func (q *Query) values() url.Values {
	v := url.Values{}
	if q == nil {
		return v
	}
	for k, vs := range q.Params {
		v[k] = vs
	}
	if q.Index != "" {
		v.Set("index", q.Index)
		if q.Wait > 0 {
			v.Set("wait", q.Wait.String())
		}
	}
	return v
}

// do sends one request and decodes the answer into out (if not nil). It
// returns the answer's X-Shoal-Index.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) (string, error) {
	return c.send(ctx, method, path, q, in, out, "")
}

// send is do with a request ID header (none when id is empty).
func (c *Client) send(ctx context.Context, method, path string, q url.Values, in, out any, id string) (string, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return "", err
		}
		body = bytes.NewReader(b)
	}
	if c.Consistent && method == "GET" {
		q = withParam(q, "consistent", "true")
	}
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return "", err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if id != "" {
		req.Header.Set(RequestIDHeader, id)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("%w at %s: %w", ErrUnreachable, c.base, unwrapURLError(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return "", fmt.Errorf("%w at %s: %v", ErrUnreachable, c.base, err)
	}
	idx := resp.Header.Get("X-Shoal-Index")
	if resp.StatusCode >= 300 {
		e := &APIError{Status: resp.StatusCode}
		if json.Unmarshal(raw, &e.ErrorBody) != nil || e.Code == "" {
			return idx, fmt.Errorf("%w at %s: unexpected answer %s", ErrUnreachable, c.base, resp.Status)
		}
		return idx, e
	}
	if out != nil {
		decode := jsoncodec.Unmarshal
		if d, ok := out.(rawDecoder); ok {
			decode = func(raw []byte, _ any) error { return d(raw) }
		}
		if err := decode(raw, out); err != nil {
			return idx, fmt.Errorf("%w at %s: answer is not valid JSON: %v", ErrUnreachable, c.base, err)
		}
	}
	return idx, nil
}

// rawDecoder, passed to send as out, decodes the answer's body itself.
type rawDecoder func(body []byte) error

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Status returns the answering replica's view of the cluster.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var s Status
	_, err := c.do(ctx, "GET", "/v1/status", nil, nil, &s)
	return s, err
}

// StatusHashes is Status with every group's state hash (it encodes each
// group's whole state: for checks, not for polling).
func (c *Client) StatusHashes(ctx context.Context) (Status, error) {
	var s Status
	_, err := c.do(ctx, "GET", "/v1/status", url.Values{"hash": {"true"}}, nil, &s)
	return s, err
}

// ClusterSettings returns the cluster settings.
func (c *Client) ClusterSettings(ctx context.Context) (ClusterSettings, error) {
	var s ClusterSettings
	_, err := c.do(ctx, "GET", "/v1/cluster/settings", nil, nil, &s)
	return s, err
}

// UpdateClusterSettings changes the settings u names and returns them all.
func (c *Client) UpdateClusterSettings(ctx context.Context, u ClusterSettingsUpdate) (ClusterSettings, error) {
	var s ClusterSettings
	_, err := c.do(ctx, "POST", "/v1/cluster/settings", nil, u, &s)
	return s, err
}

// Services lists services (one page; Query.Params may carry per_page and
// next_token).
func (c *Client) Services(ctx context.Context, q *Query) (List[Service], string, error) {
	var l List[Service]
	idx, err := c.do(ctx, "GET", "/v1/services", q.values(), nil, &l)
	return l, idx, err
}

// Service inspects one service.
func (c *Client) Service(ctx context.Context, name string, q *Query) (Service, string, error) {
	var s Service
	idx, err := c.do(ctx, "GET", "/v1/services/"+url.PathEscape(name), q.values(), nil, &s)
	return s, idx, err
}

// CreateService stores a new service.
func (c *Client) CreateService(ctx context.Context, spec ServiceSpec) (Service, string, error) {
	var s Service
	idx, err := c.write(ctx, "POST", "/v1/services", nil, spec, &s)
	return s, idx, err
}

// UpdateService replaces a service's spec; checkIndex, if not 0, must be
// its current modify_index (else a stale_index error).
func (c *Client) UpdateService(ctx context.Context, spec ServiceSpec, checkIndex uint64) (Service, string, error) {
	q := url.Values{}
	if checkIndex != 0 {
		q.Set("check_index", strconv.FormatUint(checkIndex, 10))
	}
	var s Service
	idx, err := c.do(ctx, "POST", "/v1/services/"+url.PathEscape(spec.Name), q, spec, &s)
	return s, idx, err
}

// Scale sets a replicated service's replica count.
func (c *Client) Scale(ctx context.Context, name string, replicas uint32) (Service, string, error) {
	var s Service
	idx, err := c.do(ctx, "POST", "/v1/services/"+url.PathEscape(name)+"/scale", nil, map[string]uint32{"replicas": replicas}, &s)
	return s, idx, err
}

// Rollback returns a service to its previous spec.
func (c *Client) Rollback(ctx context.Context, name string) (Service, string, error) {
	var s Service
	idx, err := c.do(ctx, "POST", "/v1/services/"+url.PathEscape(name)+"/rollback", nil, nil, &s)
	return s, idx, err
}

// RemoveService flags a service for removal; it is deleted once its last
// task is confirmed stopped.
func (c *Client) RemoveService(ctx context.Context, name string) (Service, string, error) {
	var s Service
	idx, err := c.write(ctx, "DELETE", "/v1/services/"+url.PathEscape(name), nil, nil, &s)
	return s, idx, err
}

// Tasks lists tasks; Query.Params may carry service, node, desired, state,
// per_page and next_token.
func (c *Client) Tasks(ctx context.Context, q *Query) (List[Task], string, error) {
	var l List[Task]
	var out any = &l
	if c.DecodeTasks != nil {
		out = rawDecoder(func(body []byte) error { return c.DecodeTasks(body, &l) })
	}
	idx, err := c.do(ctx, "GET", "/v1/tasks", q.values(), nil, out)
	return l, idx, err
}

// Task inspects one task with its history.
func (c *Client) Task(ctx context.Context, id string) (Task, error) {
	var t Task
	_, err := c.do(ctx, "GET", "/v1/tasks/"+url.PathEscape(id), nil, nil, &t)
	return t, err
}

// Nodes lists nodes.
func (c *Client) Nodes(ctx context.Context, q *Query) (List[Node], string, error) {
	var l List[Node]
	idx, err := c.do(ctx, "GET", "/v1/nodes", q.values(), nil, &l)
	return l, idx, err
}

// Node inspects one node.
func (c *Client) Node(ctx context.Context, id string) (Node, error) {
	var n Node
	_, err := c.do(ctx, "GET", "/v1/nodes/"+url.PathEscape(id), nil, nil, &n)
	return n, err
}

// UpdateNode changes a node's availability or labels.
func (c *Client) UpdateNode(ctx context.Context, id string, u NodeUpdate) (Node, error) {
	var n Node
	_, err := c.write(ctx, "POST", "/v1/nodes/"+url.PathEscape(id), nil, u, &n)
	return n, err
}

// RemoveNode removes a down node.
func (c *Client) RemoveNode(ctx context.Context, id string) error {
	_, err := c.write(ctx, "DELETE", "/v1/nodes/"+url.PathEscape(id), nil, nil, nil)
	return err
}

// CreateNetwork stores a network.
func (c *Client) CreateNetwork(ctx context.Context, spec NetworkSpec) (Network, error) {
	var n Network
	_, err := c.write(ctx, "POST", "/v1/networks", nil, spec, &n)
	return n, err
}

// Networks lists networks.
func (c *Client) Networks(ctx context.Context) (List[Network], error) {
	var l List[Network]
	_, err := c.do(ctx, "GET", "/v1/networks", nil, nil, &l)
	return l, err
}

// Network inspects one network.
func (c *Client) Network(ctx context.Context, name string) (Network, error) {
	var n Network
	_, err := c.do(ctx, "GET", "/v1/networks/"+url.PathEscape(name), nil, nil, &n)
	return n, err
}

// RemoveNetwork removes an unused network.
func (c *Client) RemoveNetwork(ctx context.Context, name string) error {
	_, err := c.write(ctx, "DELETE", "/v1/networks/"+url.PathEscape(name), nil, nil, nil)
	return err
}

// openStream sends a GET for a stream of JSON lines (events, logs) and
// returns the open answer, or the manager's refusal as an *APIError.
func (c *Client) openStream(ctx context.Context, pathAndQuery string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+pathAndQuery, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w at %s: %v", ErrUnreachable, c.base, unwrapURLError(err))
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		e := &APIError{Status: resp.StatusCode}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(raw, &e.ErrorBody) != nil {
			return nil, fmt.Errorf("%w at %s: unexpected answer %s", ErrUnreachable, c.base, resp.Status)
		}
		return nil, e
	}
	return resp, nil
}

// Events follows the event stream from index (a token; "" for now) and
// calls fn for every event, heartbeats included, until ctx ends, fn returns
// an error, or the stream ends (an error event ends it with an *APIError).
func (c *Client) Events(ctx context.Context, index string, topics []string, fn func(Event) error) error {
	q := url.Values{}
	if index != "" {
		q.Set("index", index)
	}
	if len(topics) > 0 {
		q.Set("topic", strings.Join(topics, ","))
	}
	if c.Consistent {
		q.Set("consistent", "true")
	}
	resp, err := c.openStream(ctx, "/v1/events?"+q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	decode := c.DecodeEvent
	if decode == nil {
		decode = func(line []byte, ev *Event) error { return jsoncodec.Unmarshal(line, ev) }
	}
	var ev Event // one for the whole stream: fn gets a copy
	for sc.Scan() {
		ev = Event{}
		if err := decode(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("%w at %s: event is not valid JSON: %v", ErrUnreachable, c.base, err)
		}
		if ev.Error != nil {
			return &APIError{Status: http.StatusGone, ErrorBody: *ev.Error}
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w at %s: event stream broke: %v", ErrUnreachable, c.base, err)
	}
	return fmt.Errorf("%w at %s: the event stream ended", ErrUnreachable, c.base)
}

// withParam returns q (or a new one) with k=v, leaving q itself alone.
func withParam(q url.Values, k, v string) url.Values {
	out := url.Values{k: {v}}
	for key, vs := range q {
		if key != k {
			out[key] = vs
		}
	}
	return out
}
