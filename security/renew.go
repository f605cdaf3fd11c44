package security

import (
	"crypto/x509"
	"time"
)

// RenewAt returns when a certificate should be renewed: at a random point
// between 50 % and 80 % of its lifetime, so thousands of nodes issued at
// once do not all come back at once. u is a uniform draw in [0, 1).
func RenewAt(c *x509.Certificate, u float64) time.Time {
	u = min(max(u, 0), 1)
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotBefore.Add(time.Duration(float64(life) * (0.5 + 0.3*u)))
}

// RenewBackoff is the wait after the n-th failed renewal in a row (n ≥ 1):
// 5 s doubling up to 1 h, but never past the certificate's expiry minus a
// margin, so the last tries happen while it is still valid.
func RenewBackoff(n int, now, notAfter time.Time) time.Duration {
	d := 5 * time.Second
	for i := 1; i < n && d < time.Hour; i++ {
		d *= 2
	}
	d = min(d, time.Hour)
	if left := notAfter.Sub(now) / 4; left > 0 && d > left {
		d = max(left, 100*time.Millisecond)
	}
	return d
}
