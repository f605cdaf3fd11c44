// Package tlsdir keeps a Shoal TLS directory on disk: the cluster CA of a
// manager, a node's or an admin's certificate and key, and a manager's join
// secrets, as PEM files written atomically (keys and secrets readable by
// the owner only).
//
// Layout (all optional; which files exist depends on who owns the directory):
//
//	ca.crt            the cluster root certificate (everyone)
//	ca.key            the root key (managers)
//	managers-ca.crt   the managers CA certificate (managers)
//	managers-ca.key   its key (managers)
//	node.crt/.key     this manager's or agent's certificate chain and key
//	admin.crt/.key    an admin credential (the CLI's --tls-dir)
//	tokens            the join secrets (managers)
package tlsdir
