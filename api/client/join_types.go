package client

// JoinRequest asks a manager for a certificate (POST /v1/join). The token
// is the credential: the request needs no client certificate.
type JoinRequest struct {
	// Token is the join token, SHOAL-1-<CA digest>-<secret>.
	Token string `json:"token"`
	// Role is "worker" (an agent) or "manager" (a replica).
	Role string `json:"role"`
	// CSR is a PEM certificate request for the joiner's own P-256 key; the
	// manager chooses every name in the certificate.
	CSR string `json:"csr"`
	// Node describes a worker's machine (its node is created at join).
	Node *JoinNode `json:"node,omitempty"`
	// Replica, RaftAddr and APIAddr describe a joining manager; the hosts
	// of both addresses go into its certificate.
	Replica  uint64 `json:"replica,omitempty"`
	RaftAddr string `json:"raft_addr,omitempty"`
	APIAddr  string `json:"api_addr,omitempty"`
	// Member asks the manager to add the replica (Replica at RaftAddr) to
	// the Raft membership of every group before it answers; the replica
	// then starts with no --peers. False: the replica is an initial member
	// (started with --peers) and only needs its certificate.
	Member bool `json:"member,omitempty"`
	// Groups is the joining manager's service group count (--groups); the
	// manager refuses a count other than the cluster's. 0: not checked.
	Groups int `json:"groups,omitempty"`
}

// JoinNode is a worker's machine as its agent describes it.
type JoinNode struct {
	Hostname     string            `json:"hostname"`
	Labels       map[string]string `json:"labels,omitempty"`
	CPU          int64             `json:"cpu,omitempty"`    // milli-cores
	Memory       int64             `json:"memory,omitempty"` // bytes
	AgentVersion string            `json:"agent_version,omitempty"`
}

// JoinAnswer is a manager's answer to a successful join.
type JoinAnswer struct {
	// NodeID is the worker's node ID (the certificate's CN).
	NodeID uint64 `json:"node_id,omitempty"`
	// Cert is the joiner's certificate chain (PEM, leaf first).
	Cert string `json:"cert"`
	// CA is the cluster's root certificate (PEM).
	CA string `json:"ca"`
	// Manager holds what a joining manager needs to act as one.
	Manager *ManagerKit `json:"manager,omitempty"`
}

// ManagerKit is the cluster authority a joining manager receives: the CA
// and its keys, the join secrets, and an admin credential for its
// operator. It is only ever sent over TLS to a holder of the manager token.
type ManagerKit struct {
	RootKey       string `json:"root_key"`
	ManagersCA    string `json:"managers_ca"`
	ManagersKey   string `json:"managers_key"`
	WorkerSecret  string `json:"worker_secret"`
	ManagerSecret string `json:"manager_secret"`
	AdminCert     string `json:"admin_cert"`
	AdminKey      string `json:"admin_key"`
}

// RenewRequest asks for a fresh certificate for the caller's own identity
// (POST /v1/renew, with the current certificate).
type RenewRequest struct {
	CSR string `json:"csr"`
}

// RenewAnswer carries the fresh certificate chain (PEM).
type RenewAnswer struct {
	Cert string `json:"cert"`
}

// TokenDoc is a join token (GET /v1/tokens/worker|manager).
type TokenDoc struct {
	Role  string `json:"role"`
	Token string `json:"token"`
	// Unsynced lists the managers a rotation could not reach: they accept
	// the old token for new joins until they receive the new one.
	Unsynced []string `json:"unsynced,omitempty"`
}

// PeerTokens carries rotated join secrets from one manager to the others
// (POST /v1/tokens/peer, manager certificates only).
type PeerTokens struct {
	WorkerSecret  string `json:"worker_secret"`
	ManagerSecret string `json:"manager_secret"`
}

// Replica is one manager replica (GET /v1/replicas; POST /v1/replicas
// takes ID and RaftAddr).
type Replica struct {
	ID       uint64 `json:"id"`
	RaftAddr string `json:"raft_addr"`
	APIAddr  string `json:"api_addr,omitempty"`
	// Groups, when adding a replica, is its service group count
	// (--groups); a count other than the cluster's is refused. 0: not
	// checked.
	Groups int `json:"groups,omitempty"`
}

// GroupMembers is one group's voting replicas, by ID.
type GroupMembers struct {
	Group   int      `json:"group"`
	Members []uint64 `json:"members"`
}

// Replicas is the cluster's membership as the answering manager applied
// it: the cluster group's replicas, and every group's member IDs.
type Replicas struct {
	Replicas []Replica      `json:"replicas"`
	Groups   []GroupMembers `json:"groups"`
}
