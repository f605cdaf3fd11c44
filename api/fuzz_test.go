package api

import (
	"encoding/json"
	"strings"
	"testing"

	"shoal/api/client"
	"shoal/statemachine"
)

// FuzzServiceSpecJSON: any body decodes, converts and validates without
// panicking, and every accepted spec is one the state machine accepts too.
func FuzzServiceSpecJSON(f *testing.F) {
	f.Add([]byte(`{"name":"web","replicas":3,"command":["sleep","1"]}`))
	f.Add([]byte(`{"name":"g","mode":"global","restart":{"condition":"none","delay":"1s"},"update":{"parallelism":0,"order":"start-first"}}`))
	f.Add([]byte(`{"name":"x","disconnect":{"lost_after":"1m","reconcile":"keep_original"},"stop_grace":5}`))
	f.Add([]byte(`{"name":"x","env":["A"],"constraints":["node.labels.a=="]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var d client.ServiceSpec
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if dec.Decode(&d) != nil {
			return
		}
		sp, err := toSpec(&d)
		if err != nil {
			if ae, ok := err.(*apiError); !ok || ae.status != 422 || ae.msg == "" {
				t.Fatalf("a refused spec must be a 422 with a message: %#v", err)
			}
			return
		}
		if err := statemachine.ValidateSpec(&sp).Err(); err != nil {
			t.Fatalf("accepted spec the state machine refuses: %v", err)
		}
		back := fromSpec(&sp)
		sp2, err := toSpec(&back)
		if err != nil || sp2.Name != sp.Name || sp2.Replicas != sp.Replicas || sp2.Restart != sp.Restart {
			t.Fatalf("render and read back changed the spec: %+v → %+v (%v)", sp, sp2, err)
		}
	})
}
