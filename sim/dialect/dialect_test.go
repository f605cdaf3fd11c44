package dialect

import (
	"slices"
	"testing"
	"time"

	sm "shoal/statemachine"
)

func TestParsePrintsBack(t *testing.T) {
	for _, line := range []string{"advance 30s", "sync n1 seqs=0,3 holds=web.1,web.2", "dump", "node n1 role-played cpu=2000"} {
		op, err := Parse(line)
		if err != nil {
			t.Fatal(err)
		}
		if got := op.String(); got != line {
			t.Errorf("Parse(%q).String() = %q", line, got)
		}
	}
}

func TestWantRefusesWhatADirectiveDoesNotTake(t *testing.T) {
	op, _ := Parse("heartbeat n1 seq=3")
	if err := op.Want(1); err == nil {
		t.Error("an option heartbeat does not take was accepted")
	}
	if err := op.Want(1, "seq"); err != nil {
		t.Error(err)
	}
	if err := op.Want(2, "seq"); err == nil {
		t.Error("a missing positional argument was accepted")
	}
}

func TestTaskName(t *testing.T) {
	for _, c := range []struct {
		in       string
		svc, slt string
		k        int
		bad      bool
	}{{in: "web.1", svc: "web", slt: "1"}, {in: "web.1#2", svc: "web", slt: "1", k: 2}, {in: "agent.n1", svc: "agent", slt: "n1"},
		{in: "web", bad: true}, {in: "web.1#0", bad: true}, {in: ".1", bad: true}} {
		svc, slot, k, err := TaskName(c.in)
		if (err != nil) != c.bad || (!c.bad && (svc != c.svc || slot != c.slt || k != c.k)) {
			t.Errorf("TaskName(%q) = %q %q %d %v", c.in, svc, slot, k, err)
		}
	}
}

func TestVocabularyNamesEachWordOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range Vocabulary {
		if seen[d.Name] {
			t.Errorf("%s is listed twice", d.Name)
		}
		seen[d.Name] = true
		if len(d.Runners) == 0 || d.Usage == "" || d.Meaning == "" {
			t.Errorf("%s: runners, usage and meaning must be given", d.Name)
		}
		for _, r := range d.Runners {
			if !slices.Contains([]string{Sim, Scenario, Monitor}, r) {
				t.Errorf("%s: unknown runner %q", d.Name, r)
			}
		}
	}
}

func TestParseSeqs(t *testing.T) {
	got, err := ParseSeqs("0,current,current-1,current+2,7")
	if err != nil {
		t.Fatal(err)
	}
	var of []uint64
	for _, s := range got {
		of = append(of, s.Of(10))
	}
	if want := []uint64{0, 10, 9, 12, 7}; !slices.Equal(of, want) {
		t.Errorf("with current 10: %v, want %v", of, want)
	}
	for _, bad := range []string{"", "current1", "x", "-1"} {
		if _, err := ParseSeqs(bad); err == nil {
			t.Errorf("ParseSeqs(%q) accepted", bad)
		}
	}
}

func TestParseReport(t *testing.T) {
	op, _ := Parse("report n1 web.1#2 failed exit=3 message=boom")
	r, err := ParseReport(op)
	if err != nil || r != (Report{Node: "n1", Task: "web.1#2", State: "failed", Exit: 3, Message: "boom"}) {
		t.Errorf("%+v %v", r, err)
	}
	op, _ = Parse("report n1 web.1")
	if _, err := ParseReport(op); err == nil {
		t.Error("a report without a state was accepted")
	}
}

func TestServiceSpec(t *testing.T) {
	op, _ := Parse("create-service web replicas=3 failure-action=rollback update-delay=5s restart=none networks=a,b lost-after=1m reconcile=keep_original")
	spec := sm.ServiceSpec{Name: "web", Replicas: 1}
	if err := ServiceSpec(op, &spec, true); err != nil {
		t.Fatal(err)
	}
	if spec.Replicas != 3 || spec.Update.FailureAction != sm.ActionRollback || spec.Update.Delay != int64(5*time.Second) ||
		spec.Restart.Condition != sm.RestartNone || !slices.Equal(spec.Networks, []string{"a", "b"}) ||
		spec.Disconnect.LostAfter != int64(time.Minute) || spec.Disconnect.Reconcile != sm.ReconcileKeepOriginal {
		t.Errorf("%+v", spec)
	}
	// A created service's rollback takes the update's configuration,
	// pausing where the update rolls back.
	if spec.Rollback.Delay != spec.Update.Delay || spec.Rollback.FailureAction != sm.ActionPause {
		t.Errorf("rollback %+v", spec.Rollback)
	}
	op, _ = Parse("update-service web order=sideways")
	if err := ServiceSpec(op, &spec, false); err == nil {
		t.Error("an unknown order was accepted")
	}
}
