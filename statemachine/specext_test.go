package statemachine

import (
	"bytes"
	"maps"
	"slices"
	"testing"
)

// A spec's labels and rollback configuration survive the batch codec and
// a snapshot.
func TestSpecLabelsAndRollbackSurviveCodecs(t *testing.T) {
	spec := ServiceSpec{Name: "web", Replicas: 2, Labels: map[string]string{"shoal.stack": "shop", "tier": "front"},
		Update:   UpdateConfig{Parallelism: 1, Monitor: 5e9, FailureAction: ActionRollback},
		Rollback: UpdateConfig{Parallelism: 3, Delay: 2e9, Monitor: 7e9, FailureAction: ActionContinue, MaxFailureRatio: 0.5, Order: StartFirst}}
	got, err := DecodeBatch(AppendBatch(nil, []Command{{Kind: CmdCreateService, Spec: &spec}}))
	if err != nil {
		t.Fatal(err)
	}
	if g := got[0].Spec; !maps.Equal(g.Labels, spec.Labels) || g.Rollback != spec.Rollback {
		t.Fatalf("batch codec: labels %v rollback %+v, want %v %+v", g.Labels, g.Rollback, spec.Labels, spec.Rollback)
	}
	h := newHarness(t, Config{Group: 1})
	h.ok(Command{Kind: CmdCreateService, Spec: &spec})
	loaded, err := FromCanonical(h.s.Canonical())
	if err != nil {
		t.Fatal(err)
	}
	if g := loaded.ServiceByName("web").Spec; !maps.Equal(g.Labels, spec.Labels) || g.Rollback != spec.Rollback {
		t.Fatalf("snapshot: labels %v rollback %+v, want %v %+v", g.Labels, g.Rollback, spec.Labels, spec.Rollback)
	}
	if loaded.Hash() != h.s.Hash() {
		t.Fatal("hash differs after a snapshot round trip")
	}
	// A rollback's failure action may not be rollback; a label key needs
	// a name.
	for _, bad := range []ServiceSpec{
		{Name: "a", Rollback: UpdateConfig{FailureAction: ActionRollback}},
		{Name: "b", Rollback: UpdateConfig{Monitor: -1}},
		{Name: "c", Labels: map[string]string{"": "x"}},
		{Name: "d", Labels: map[string]string{"k=v": "x"}},
	} {
		if ValidateSpec(&bad).Err() == nil {
			t.Errorf("spec %+v accepted", bad)
		}
	}
}

// oldSpecWorld is a state with one service whose rollback configuration is
// what decoding it from a format written before rollback configurations
// gives: its update configuration, pausing where the update rolls back.
func oldSpecWorld(t *testing.T) (*harness, ServiceSpec) {
	upd := UpdateConfig{Parallelism: 2, Delay: 1e9, Monitor: 3e9, FailureAction: ActionRollback, MaxFailureRatio: 0.25, Order: StartFirst}
	rb := upd
	rb.FailureAction = ActionPause
	spec := ServiceSpec{Name: "web", Replicas: 2, Command: []string{"sleep", "1000"}, Update: upd, Rollback: rb}
	h := newHarness(t, Config{Group: 1})
	h.addNodes(1)
	h.ok(Command{Kind: CmdCreateService, Spec: &spec})
	return h, spec
}

// Entries (batch version 1) and snapshots (format 6) written before specs
// carried labels and a rollback configuration still decode: the spec has
// no labels, and its rollback moves as rollbacks did then, by the update
// configuration, pausing on failure.
func TestSpecFromOlderFormatsDecodes(t *testing.T) {
	h, spec := oldSpecWorld(t)
	var ext encoder
	encodeSpecExt(&ext, &spec)

	// A version-1 batch: the current encoding without the spec's tail (the
	// spec is the last field of a create-service command).
	cur := AppendBatch(nil, []Command{{Kind: CmdCreateService, Spec: &spec}})
	if !bytes.HasSuffix(cur, ext.b) {
		t.Fatal("the spec's extension is not the batch's tail")
	}
	v1 := append([]byte{batchVersionV1}, cur[1:len(cur)-len(ext.b)]...)
	got, err := DecodeBatch(v1)
	if err != nil {
		t.Fatalf("version-1 batch: %v", err)
	}
	if g := got[0].Spec; g.Labels != nil || g.Rollback != spec.Rollback || g.Update != spec.Update {
		t.Fatalf("version-1 batch decoded update %+v rollback %+v labels %v, want rollback %+v", g.Update, g.Rollback, g.Labels, spec.Rollback)
	}

	// A format-6 snapshot: the current encoding under the old magic,
	// without the spec's tail.
	canon := h.s.Canonical()
	var full encoder
	encodeSpec(&full, &spec)
	at := bytes.Index(canon, full.b)
	if at < 0 || bytes.Index(canon[at+1:], full.b) >= 0 {
		t.Fatal("the spec's encoding is not found once in the snapshot")
	}
	end := at + len(full.b)
	old := append([]byte(snapshotMagicV6), canon[len(snapshotMagic):end-len(ext.b)]...)
	old = append(old, canon[end:]...)
	loaded, err := FromCanonical(old)
	if err != nil {
		t.Fatalf("format-6 snapshot: %v", err)
	}
	if loaded.Hash() != h.s.Hash() {
		g := loaded.ServiceByName("web").Spec
		t.Fatalf("format-6 snapshot decoded to another state: update %+v rollback %+v", g.Update, g.Rollback)
	}
	if err := loaded.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// withoutSpecExts returns canon (s's canonical encoding) with each service
// spec's labels and rollback configuration cut out, as formats before 7
// wrote it.
func withoutSpecExts(t *testing.T, s *State, canon []byte) []byte {
	t.Helper()
	out := slices.Clone(canon)
	from := 0
	for _, id := range s.ServiceIDs() {
		svc := s.services[id]
		for _, sp := range []*ServiceSpec{&svc.Spec, svc.PrevSpec} {
			if sp == nil {
				continue
			}
			var full, ext encoder
			encodeSpec(&full, sp)
			encodeSpecExt(&ext, sp)
			at := bytes.Index(out[from:], full.b)
			if at < 0 {
				t.Fatalf("the spec of %q is not in the snapshot", sp.Name)
			}
			end := from + at + len(full.b)
			out = slices.Delete(out, end-len(ext.b), end)
			from = end - len(ext.b)
		}
	}
	return out
}
