package check

import (
	"fmt"
	"time"

	"shoal/api/client"
)

// Suspect is an address-live conflict seen in the event stream's view.
//
// The stream renders each event's object as the manager has it when it
// sends the event, not as it was at the event's index: an event of a task
// created before another task's deletion can show the address that task
// got only after the deletion, ahead of the deletion's own event. Under
// load, when the stream lags, the view then briefly shows two tasks on one
// address that never held it together. So a conflict is first a suspect,
// and it counts as a violation only if a read of both tasks from the
// replicated state confirms it (Confirm). A double attachment that the
// state already resolved by the time of the read is missed here; holding
// an address twice on nodes is what address-agents checks, on the agents'
// own view.
type Suspect struct {
	Addr    string    // network/address key
	Tasks   [2]uint64 // the task that held it in the view, the newcomer
	At      time.Time // when the view showed both
	Objects []string  // both tasks as the view had them
}

// Suspects takes the conflicts seen so far (each is handed out once).
func (c *Checker) Suspects() []Suspect {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.mu.suspects
	c.mu.suspects = nil
	return out
}

// Requeue hands s out again at the next Suspects: its tasks could not be
// read this time.
func (c *Checker) Requeue(s Suspect) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.suspects = append(c.mu.suspects, s)
}

// Confirm settles a suspect with its tasks as read from the replicated
// state, one after the other (a nil task: it no longer exists): the first
// (a), the second (b), then the first again (again). Two reads are not
// one snapshot: a pending task can be read holding the address, then be
// deleted (its address freed at once), and the other read holding it
// next. A task never gets back an address it let go of, so a first task
// holding the address in both its reads held it all along, also when the
// second was read holding it: that is a violation, if neither read shows
// a terminal task or the address released.
func (c *Checker) Confirm(s Suspect, a, b, again *client.Task, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	holds := func(t *client.Task) bool {
		if t == nil {
			return false
		}
		if r, ok := stateRank[t.State]; !ok || r >= rankComplete {
			return false
		}
		for _, x := range t.Addresses {
			if !x.Released && addrKey(x.Network, x.Addr) == s.Addr {
				return true
			}
		}
		return false
	}
	if !holds(a) || !holds(b) || !holds(again) {
		return
	}
	objs := append(append([]string(nil), s.Objects...),
		fmt.Sprintf("confirmed: task %d %s desired=%s node=%d", s.Tasks[0], a.State, a.Desired, a.Node),
		fmt.Sprintf("confirmed: task %d %s desired=%s node=%d", s.Tasks[1], b.State, b.Desired, b.Node))
	c.violateLocked(now, AddressLive, fmt.Sprintf("address %s is attached to two tasks that are not terminal: %d and %d",
		s.Addr, s.Tasks[0], s.Tasks[1]), objs...)
}

// ConfirmUnread settles a suspect whose tasks could not be read: it counts
// as a violation, with the reason it could not be cleared.
func (c *Checker) ConfirmUnread(s Suspect, err error, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.violateLocked(now, AddressLive, fmt.Sprintf("address %s is attached to two tasks that are not terminal: %d and %d (in the stream's view; the state could not be read to clear it: %v)",
		s.Addr, s.Tasks[0], s.Tasks[1], err), s.Objects...)
}
