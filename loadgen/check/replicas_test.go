package check

import (
	"testing"
	"time"

	"shoal/api/client"
)

func status(rep uint64, groups ...client.GroupStatus) client.Status {
	return client.Status{Replica: rep, Groups: groups}
}

// CompareReplicas flags a group only when every replica is at one index and
// the hashes differ; a replica behind leaves the group uncompared.
func TestCompareReplicas(t *testing.T) {
	g := func(group int, idx uint64, hash string) client.GroupStatus {
		return client.GroupStatus{Group: group, AppliedIndex: idx, Hash: hash}
	}
	sts := []client.Status{
		status(1, g(0, 10, "aa"), g(1, 20, "bb"), g(2, 30, "cc")),
		status(2, g(0, 10, "aa"), g(1, 20, "XX"), g(2, 29, "c0")),
		status(3, g(0, 10, "aa"), g(1, 20, "bb"), g(2, 30, "cc")),
	}
	got := CompareReplicas(sts)
	if len(got) != 2 {
		t.Fatalf("compared %d groups, want 2 (group 2 has a replica behind): %+v", len(got), got)
	}
	if got[0].Group != 0 || got[0].Problem != "" {
		t.Fatalf("group 0: %+v, want agreement", got[0])
	}
	want := "group 1 at index 20: replicas hold different states: hash XX on replicas [2], hash bb on replicas [1 3]"
	if got[1].Group != 1 || got[1].Problem != want {
		t.Fatalf("group 1: %q, want %q", got[1].Problem, want)
	}
}

// The checker counts agreements as checks and disagreements as violations.
func TestReplicasAgreeCounts(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := New(t0)
	c.ReplicasAgree()
	c.ReplicasDisagree("group 1 differs", t0)
	if n := violations(c, ReplicasAgree); n != 1 {
		t.Fatalf("violations = %d, want 1", n)
	}
}
