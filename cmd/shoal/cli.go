package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"shoal/api/client"
	"shoal/security/tlsdir"
)

// cliOptions are the options every client command shares.
type cliOptions struct {
	addr    string
	tlsDir  string // ca.crt, admin.crt, admin.key
	format  string
	quiet   bool
	timeout time.Duration
	// consistent: reads go through the quorum (?consistent=true).
	consistent bool
}

// defaultAddr is the API address a manager listens on and the CLI talks
// to when neither is told otherwise.
const defaultAddr = "127.0.0.1:7700"

// addClientFlags adds --addr to a command group.
func addClientFlags(cmd *cobra.Command, o *cliOptions) {
	def := os.Getenv("SHOAL_ADDR")
	if def == "" {
		def = defaultAddr
	}
	cmd.PersistentFlags().StringVar(&o.addr, "addr", def, "manager API address, host:port or http(s)://host:port (env SHOAL_ADDR)")
	cmd.PersistentFlags().BoolVar(&o.consistent, "consistent", false,
		"read through the cluster's quorum (linearizable; fails while the manager cannot reach one) instead of the answering manager's possibly stale state")
	cmd.PersistentFlags().StringVar(&o.tlsDir, "tls-dir", os.Getenv("SHOAL_TLS_DIR"),
		"directory with ca.crt, admin.crt and admin.key (a manager's DATA-DIR/tls) for a cluster with TLS (env SHOAL_TLS_DIR); empty: plain HTTP")
}

func (o *cliOptions) client() (*client.Client, error) {
	var cfg *tls.Config
	if o.tlsDir != "" {
		var err error
		if cfg, err = adminTLS(o.tlsDir); err != nil {
			return nil, err
		}
	}
	c, err := client.NewTLS(o.addr, cfg)
	if err != nil {
		return nil, err
	}
	c.Consistent = o.consistent
	c.OnResend = func(id string, why error) {
		fmt.Fprintf(os.Stderr, "note: %v\nnote: sending the change again as request %s (the cluster applies it at most once)\n", why, id)
	}
	return c, nil
}

// adminTLS reads an admin credential from dir.
func adminTLS(dir string) (*tls.Config, error) {
	root, cert, err := tlsdir.Dir(dir).AdminCredential()
	if err != nil {
		// A manager's data directory given for its tls/ subdirectory.
		sub := filepath.Join(dir, "tls")
		if _, serr := os.Stat(filepath.Join(sub, "ca.crt")); serr == nil {
			return nil, fmt.Errorf("--tls-dir: %w; did you mean --tls-dir %s?", err, sub)
		}
		return nil, fmt.Errorf("--tls-dir: %w", err)
	}
	return client.NewCredentials(root, &cert).TLS(), nil
}

// ctx returns a context for one request-answer exchange.
func requestCtx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), 30*time.Second)
}

// withClient runs fn with a client of the manager and a deadline for one
// exchange, and turns its error into one line for the user.
func withClient(cmd *cobra.Command, o *cliOptions, fn func(ctx context.Context, c *client.Client) error) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	ctx, cancel := requestCtx(cmd)
	defer cancel()
	return userError(fn(ctx, c))
}

// isAPIError says whether err is the manager's answer (a refusal), not a
// failure to reach it.
func isAPIError(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae)
}

// userError turns a client error into one line for the user.
func userError(err error) error {
	var ae *client.APIError
	switch {
	case errors.As(err, &ae):
		if ae.Field != "" && !strings.Contains(ae.ErrorBody.Error, ae.Field) {
			return fmt.Errorf("%s (field %s)", ae.ErrorBody.Error, ae.Field)
		}
		return errors.New(ae.ErrorBody.Error)
	case errors.Is(err, client.ErrUnreachable):
		msg := err.Error()
		switch {
		case strings.Contains(msg, "server gave HTTP response"):
			return fmt.Errorf("%s: the manager speaks plain HTTP (started with --insecure or --dev): drop --tls-dir / SHOAL_TLS_DIR", strings.SplitN(msg, ": ", 2)[0])
		case strings.Contains(msg, "malformed HTTP response"), strings.Contains(msg, "EOF") && !strings.Contains(msg, "https://"):
			return fmt.Errorf("%s: the manager may require TLS: pass --tls-dir DATA-DIR/tls of a manager (or set SHOAL_TLS_DIR)", strings.SplitN(msg, ": ", 2)[0])
		case strings.Contains(msg, "certificate"):
			where, why, _ := strings.Cut(msg, ": ")
			return fmt.Errorf("%s: TLS failed: %s; pass --tls-dir with the DATA-DIR/tls of a manager of this cluster", where, why)
		}
		if i := strings.Index(msg, ": dial"); i >= 0 {
			msg = msg[:i] + ": is a manager running there? (start one with `shoal serve`, or set --addr / SHOAL_ADDR)"
		}
		return errors.New(msg)
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return errors.New("the manager did not answer in time")
	}
	return err
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes rows under a header with aligned columns.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// checkFormat validates --format.
func checkFormat(f string) error {
	if f != "" && f != "table" && f != "json" {
		return fmt.Errorf("--format %q: use table or json", f)
	}
	return nil
}

// ago renders how long ago t was, docker style ("5 seconds ago").
func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t)
	switch {
	case d < 2*time.Second:
		return "less than a second ago"
	case d < time.Minute:
		return fmt.Sprintf("%d seconds ago", int(d.Seconds()))
	case d < 2*time.Minute:
		return "a minute ago"
	case d < time.Hour:
		return fmt.Sprintf("%d minutes ago", int(d.Minutes()))
	case d < 2*time.Hour:
		return "an hour ago"
	case d < 48*time.Hour:
		return fmt.Sprintf("%d hours ago", int(d.Hours()))
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
