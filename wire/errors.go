package wire

import (
	"errors"
	"fmt"
	"strconv"
)

// Sentinel errors. Decoders wrap them with %w and say what was wrong.
var (
	// ErrMalformed: the bytes are not a well-formed frame or JSON message.
	ErrMalformed = errors.New("wire: malformed message")
	// ErrTooLarge: a payload is over MaxFrame before compression.
	ErrTooLarge = errors.New("wire: message too large")
	// ErrVersion: the frame was written by an incompatible protocol version.
	ErrVersion = errors.New("wire: unsupported protocol version")
	// ErrType: the frame carries a type the reader does not know or did not expect.
	ErrType = errors.New("wire: unexpected message type")
	// ErrBadCursor: an index token does not parse.
	ErrBadCursor = errors.New("wire: bad index")
)

// Error returns the user-facing message (the code when there is none).
func (e *Error) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return "manager: " + e.Code
}

// Is matches another *Error with the same Code, so errors.Is(err,
// &wire.Error{Code: wire.CodeNotLeader}) tells a not-leader answer.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// detailed is a sentinel with the details of one failure. Its text is the
// sentinel's followed by the details, and errors.Is finds the sentinel.
type detailed struct {
	sentinel error
	detail   string
}

func (d *detailed) Error() string { return d.sentinel.Error() + ": " + d.detail }
func (d *detailed) Unwrap() error { return d.sentinel }

func errorf(sentinel error, format string, args ...any) error {
	return &detailed{sentinel, fmt.Sprintf(format, args...)}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
