// Package security holds the cluster's identities: its certificate
// authority, the certificates it issues to managers, workers and
// administrators, and the join tokens that let a new machine obtain one.
//
// The one idea: a cluster is identified by the SHA-256 digest of its root
// certificate, and every credential chains to that root. A join token
// SHOAL-1-<digest>-<secret> carries the digest, so a joiner checks the
// manager's CA against it before sending the secret (no trust on first use),
// and the manager checks the secret in constant time.
//
// Layout of the authority:
//
//	root CA (ECDSA P-256, 20 years; its digest names the cluster)
//	├── managers CA (intermediate) ── manager certificates (server + client;
//	│                                  the only ones Raft accepts)
//	├── worker certificates (client; CN = node ID)
//	└── admin certificates (client; CN = "admin")
//
// Every certificate carries CN = identity (node ID, replica ID or "admin"),
// OU = role and O = cluster ID. Raft trusts only the managers CA, so a worker
// or admin certificate of the same cluster cannot speak Raft; the API trusts
// the root and decides per endpoint from the role.
//
// The package is pure: time and randomness come in as arguments, nothing
// touches the disk or the network, and nothing runs in the background.
// (The callbacks it sets in a TLS configuration read that configuration's
// clock, Config.Time or the wall clock, as crypto/tls's own checks do.)
// Loading and storing PEM files is the callers' job (cmd/shoal).
package security
