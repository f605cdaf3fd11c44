package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"shoal/internal/freeport"
)

// A write whose outcome is unknown is sent again under the same request
// ID (so the cluster applies it at most once) until it is answered; a
// write refused for a known reason, or that could not connect at all, is
// not sent again.
func TestWriteResendsUnderOneRequestID(t *testing.T) {
	var mu sync.Mutex
	var ids []string
	unknownLeft := 1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		ids = append(ids, r.Header.Get(RequestIDHeader))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/services/bad":
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error":"no","code":"conflict"}`))
		case unknownLeft > 0:
			unknownLeft--
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"not confirmed in time","code":"unknown_outcome","request_id":"x"}`))
		default:
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"spec":{"name":"web"}}`))
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resent := 0
	c.OnResend = func(string, error) { resent++ }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	svc, _, err := c.CreateService(ctx, ServiceSpec{Name: "web"})
	if err != nil || svc.Spec.Name != "web" {
		t.Fatalf("create: %+v, %v", svc, err)
	}
	if len(ids) != 2 || ids[0] == "" || ids[0] != ids[1] || resent != 1 {
		t.Fatalf("sent under request IDs %q with %d resends; want one ID twice, one resend", ids, resent)
	}

	ids = nil
	if _, _, err := c.RemoveService(ctx, "bad"); err == nil || len(ids) != 1 {
		t.Fatalf("a refused write: %v after %d sends; want the refusal after one", err, len(ids))
	}

	// Nothing listens: nothing left, nothing resent.
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	down, err := New(addr)
	if err != nil {
		t.Fatal(err)
	}
	down.OnResend = func(string, error) { t.Error("a write that never connected was sent again") }
	_, _, err = down.CreateService(ctx, ServiceSpec{Name: "web"})
	var op *net.OpError
	if !errors.Is(err, ErrUnreachable) || !errors.As(err, &op) {
		t.Fatalf("create against nothing: %v", err)
	}
}
