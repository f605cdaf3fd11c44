// Package callctx is a context with a deadline whose timer is set up only
// when something waits on it.
//
// A call served or made in a few microseconds (an agent's heartbeat) reads
// its context's deadline, if anything, and rarely waits on Done; a
// context.WithTimeout per call still starts a timer and stops it again,
// a share of every such call's CPU. WithDeadline keeps everything a
// context promises: Done is closed at the deadline, when the parent ends
// or at cancel, whichever comes first, and Err says which. (Until Done was
// asked for, context.Cause tells the parent's cause only.)
package callctx
