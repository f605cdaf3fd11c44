package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"shoal/statemachine"
)

// The JSON mapping (README.md has an example of every message): field names
// are snake_case, durations are integers in nanoseconds, enums are their
// lowercase names, a cursor is its token string. DecodeJSON is strict: an
// unknown field, an unknown enum name or trailing data is an error.

// EncodeJSON returns m as JSON.
func EncodeJSON(m Message) ([]byte, error) {
	if m == nil || !m.Type().Valid() {
		return nil, fmt.Errorf("%w: nil or unknown message", ErrType)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %s as JSON: %w", ErrMalformed, m.Type(), err)
	}
	return b, nil
}

// DecodeJSON decodes one JSON message of type t.
func DecodeJSON(t MsgType, b []byte) (Message, error) {
	m := New(t)
	if m == nil {
		return nil, fmt.Errorf("%w: message type %d is unknown", ErrType, uint8(t))
	}
	if err := strictJSON(b, m); err != nil {
		var d *detailed
		if errors.As(err, &d) {
			return nil, errorf(d.sentinel, "%s JSON: %s", t, d.detail)
		}
		return nil, fmt.Errorf("%w: %s JSON: %w", ErrMalformed, t, err)
	}
	// What JSON accepts the binary codec must accept too (required enums
	// such as an assignments kind, message counts): the encoder checks it.
	if _, err := appendPayload(nil, m); err != nil {
		var d *detailed
		if errors.As(err, &d) {
			return nil, errorf(d.sentinel, "%s JSON: %s", t, d.detail)
		}
		return nil, fmt.Errorf("%s JSON: %w", t, err)
	}
	return m, nil
}

// strictJSON decodes exactly one JSON value into v, refusing unknown fields.
func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return fmt.Errorf("data after the message")
	}
	if _, err := d.Token(); err == nil {
		return fmt.Errorf("data after the message")
	}
	return nil
}

// MarshalJSON writes the cursor as its token string.
func (c Cursor) MarshalJSON() ([]byte, error) {
	return json.Marshal(c.Token())
}

// UnmarshalJSON reads a token string; null and "" are the empty cursor.
func (c *Cursor) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*c = nil
		return nil
	}
	var tok string
	if err := json.Unmarshal(b, &tok); err != nil {
		return errorf(ErrBadCursor, "an index is a token string, not %s", clip(string(b)))
	}
	v, err := ParseCursor(tok)
	*c = v
	return err
}

// The structs holding the state machine's enums write them by name, through
// mirrors that keep the fields in declaration order.

type heartbeatAckJSON struct {
	Period int64  `json:"period"`
	Status string `json:"status"`
}

func (h HeartbeatAck) MarshalJSON() ([]byte, error) {
	if !validNodeStatus(h.Status) {
		return nil, fmt.Errorf("node status %d has no name", h.Status)
	}
	return json.Marshal(heartbeatAckJSON{h.Period, h.Status.String()})
}

func (h *HeartbeatAck) UnmarshalJSON(b []byte) error {
	var v heartbeatAckJSON
	if err := strictJSON(b, &v); err != nil {
		return err
	}
	s, err := ParseNodeStatus(v.Status)
	*h = HeartbeatAck{Period: v.Period, Status: s}
	return err
}

type assignmentJSON struct {
	Task        statemachine.TaskID `json:"task"`
	Service     string              `json:"service"`
	Slot        uint32              `json:"slot"`
	SpecVersion uint32              `json:"spec_version"`
	Desired     string              `json:"desired"`
	State       string              `json:"state"`
	Addresses   []Address           `json:"addresses,omitempty"`
}

func (a Assignment) MarshalJSON() ([]byte, error) {
	if !validDesired(a.Desired) || !a.State.Valid() {
		return nil, fmt.Errorf("task %d: desired %d or state %d has no name", a.Task, a.Desired, a.State)
	}
	return json.Marshal(assignmentJSON{a.Task, a.Service, a.Slot, a.SpecVersion,
		a.Desired.String(), a.State.String(), a.Addresses})
}

func (a *Assignment) UnmarshalJSON(b []byte) error {
	var v assignmentJSON
	if err := strictJSON(b, &v); err != nil {
		return err
	}
	d, err := ParseDesiredState(v.Desired)
	if err != nil {
		return err
	}
	s, err := ParseTaskState(v.State)
	*a = Assignment{Task: v.Task, Service: v.Service, Slot: v.Slot, SpecVersion: v.SpecVersion,
		Desired: d, State: s, Addresses: v.Addresses}
	return err
}

type statusReportJSON struct {
	Task     statemachine.TaskID `json:"task"`
	State    string              `json:"state"`
	ExitCode int32               `json:"exit_code"`
	Message  string              `json:"message,omitempty"`
	At       int64               `json:"at"`
}

func (r StatusReport) MarshalJSON() ([]byte, error) {
	if !r.State.Valid() {
		return nil, fmt.Errorf("task %d: state %d has no name", r.Task, r.State)
	}
	return json.Marshal(statusReportJSON{r.Task, r.State.String(), r.ExitCode, r.Message, r.At})
}

func (r *StatusReport) UnmarshalJSON(b []byte) error {
	var v statusReportJSON
	if err := strictJSON(b, &v); err != nil {
		return err
	}
	s, err := ParseTaskState(v.State)
	*r = StatusReport{Task: v.Task, State: s, ExitCode: v.ExitCode, Message: v.Message, At: v.At}
	return err
}
