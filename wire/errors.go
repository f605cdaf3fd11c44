package wire

import (
	"errors"
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
	ErrBadCursor = errors.New("wire: bad index token")
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

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
