package wire

import (
	"errors"
	"testing"
)

// TestJSONStrict: DecodeJSON refuses whatever is not exactly the documented
// form, with the sentinel that says why.
func TestJSONStrict(t *testing.T) {
	for _, c := range []struct {
		name string
		typ  MsgType
		json string
		want error
	}{
		{"unknown field", TypeHeartbeat, `{"node_id":1,"session_id":2,"sesion":3}`, ErrMalformed},
		{"unknown nested field", TypeStatusBatch, `{"node_id":1,"reports":[{"task":1,"state":"running","at":0,"exitcode":1}]}`, ErrMalformed},
		{"unknown state", TypeStatusBatch, `{"node_id":1,"reports":[{"task":1,"state":"Running","at":0}]}`, ErrMalformed},
		{"missing state", TypeStatusBatch, `{"node_id":1,"reports":[{"task":1,"at":0}]}`, ErrMalformed},
		{"unknown desired", TypeAssignments, `{"kind":"complete","tasks":[{"task":1,"desired":"run","state":"new"}]}`, ErrMalformed},
		{"unknown kind", TypeAssignments, `{"kind":"full"}`, ErrMalformed},
		{"missing kind", TypeAssignments, `{}`, ErrMalformed},
		{"unknown status", TypeHeartbeatAck, `{"period":1,"status":"up"}`, ErrMalformed},
		{"unknown result", TypeStatusAck, `{"results":["ok"]}`, ErrMalformed},
		{"result as number", TypeStatusAck, `{"results":[0]}`, ErrMalformed},
		{"messages mismatch", TypeStatusAck, `{"results":["accepted"],"messages":["a","b"]}`, ErrMalformed},
		{"bad cursor", TypeAssignmentsRequest, `{"node_id":1,"cursor":"!!"}`, ErrBadCursor},
		{"cursor as list", TypeAssignmentsRequest, `{"node_id":1,"cursor":[1,2]}`, ErrBadCursor},
		{"node id over 32 bits", TypeHeartbeat, `{"node_id":4294967296}`, ErrMalformed},
		{"trailing data", TypeHeartbeat, `{"node_id":1} {}`, ErrMalformed},
		{"not an object", TypeSyncAnswer, `[1]`, ErrMalformed},
		{"unknown type", 0, `{}`, ErrType},
	} {
		m, err := DecodeJSON(c.typ, []byte(c.json))
		if !errors.Is(err, c.want) {
			t.Errorf("%s: DecodeJSON(%s) = %#v, %v; want %v", c.name, c.json, m, err, c.want)
		}
	}
	if m, err := DecodeJSON(TypeAssignmentsRequest, []byte(`{"node_id":1,"cursor":null}`)); err != nil || m.(*AssignmentsRequest).Cursor != nil {
		t.Errorf("a null cursor: %v, %v", m, err)
	}
	if _, err := EncodeJSON(&StatusAck{Results: []ReportResult{7}}); !errors.Is(err, ErrMalformed) {
		t.Errorf("EncodeJSON of an unnamed result: %v", err)
	}
}
