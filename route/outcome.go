package route

import (
	"errors"

	"shoal/statemachine"
)

// ErrNoGroup is returned for a group number the cluster does not have.
var ErrNoGroup = errors.New("no such group")

// Outcome is what became of one submitted command.
type Outcome struct {
	// Result is the state machine's verdict; zero when Failed is set.
	Result statemachine.Result
	// Failed is set when the command's entry was not applied: the
	// engine's ErrClosed, ErrTimeout, ErrNotProposed or ErrRejected, or the
	// submitter's context error.
	Failed error
}

// Err returns Failed, else the result's rejection, else nil.
func (o Outcome) Err() error {
	if o.Failed != nil {
		return o.Failed
	}
	return o.Result.Err()
}
