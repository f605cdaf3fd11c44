package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"time"
)

// writeAttempts bounds how often write sends one change.
const writeAttempts = 3

// write sends a change under a request ID of its own and, while its
// outcome is unknown (the manager answered unknown_outcome, or the
// connection failed after the request may have left), sends it again
// with the same ID: the cluster applies a request ID at most once, so a
// change that did apply is answered as applied, and one that did not is
// applied now. A failure to connect at all is not resent: nothing left.
func (c *Client) write(ctx context.Context, method, path string, q url.Values, in, out any) (string, error) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := "c-" + hex.EncodeToString(b[:])
	for attempt := 1; ; attempt++ {
		idx, err := c.send(ctx, method, path, q, in, out, id)
		if err == nil || attempt == writeAttempts || !outcomeUnknown(err) {
			return idx, err
		}
		if c.OnResend != nil {
			c.OnResend(id, err)
		}
		select {
		case <-ctx.Done():
			return idx, err
		case <-time.After(time.Second):
		}
	}
}

// outcomeUnknown: the manager said so, or the request may have reached it
// and its answer was lost.
func outcomeUnknown(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code == CodeUnknown
	}
	if !errors.Is(err, ErrUnreachable) {
		return false
	}
	var op *net.OpError
	return !(errors.As(err, &op) && op.Op == "dial")
}

// Request asks what became of the write with request ID id; notAfter (the
// zero time if unknown) is the not_after of its unknown_outcome answer.
func (c *Client) Request(ctx context.Context, id string, notAfter time.Time) (RequestOutcome, error) {
	q := url.Values{}
	if !notAfter.IsZero() {
		q.Set("not_after", notAfter.Format(time.RFC3339Nano))
	}
	var o RequestOutcome
	_, err := c.do(ctx, "GET", "/v1/requests/"+url.PathEscape(id), q, nil, &o)
	return o, err
}
