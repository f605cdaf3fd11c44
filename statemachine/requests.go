package statemachine

// Request IDs make a user's write answerable after its answer was lost,
// and safe to send again. A user command may carry a request ID (Command.
// RequestID). Once such a command is applied, the group records the ID
// with the entry's index and time and the command's result; a command
// with an ID already recorded is not applied again and gets the recorded
// result. Only applied commands are recorded: a refused one changed
// nothing, so sending it again is safe and it is checked afresh. Records
// are kept for RequestRetention of the state's time and then forgotten,
// at the first entry past that; never for agents' reports (agents send no
// IDs).

// RequestRetention is how long (unix nanoseconds of the state's time) an
// applied request ID is remembered: 10 minutes.
const RequestRetention int64 = 10 * 60 * 1e9

// MaxRequestIDLen bounds a request ID's length in bytes.
const MaxRequestIDLen = 64

// RequestRecord is what the group remembers of an applied request.
type RequestRecord struct {
	// Index and Time are the Raft index and state time of the entry that
	// applied it.
	Index uint64
	Time  int64
	// Result is the command's result (always CodeOK: only applied
	// commands are recorded).
	Result Result
}

// requestLog holds the records in application order (so in time order:
// the state's time never goes back) and indexed by ID.
type requestLog struct {
	byID  map[string]RequestRecord
	order []string // IDs in the order they were recorded; head first
}

// Request returns the record of request id, if this group applied it in
// the last RequestRetention.
func (s *State) Request(id string) (RequestRecord, bool) {
	r, ok := s.req.byID[id]
	return r, ok
}

// applyRequest applies c unless its request ID is recorded, and records
// the ID once c is applied.
func (s *State) applyRequest(c *Command) Result {
	if c.RequestID == "" {
		return s.applyOne(c)
	}
	if len(c.RequestID) > MaxRequestIDLen {
		return reject(CodeInvalid, "request ID of %d bytes is longer than %d", len(c.RequestID), MaxRequestIDLen)
	}
	if r, ok := s.req.byID[c.RequestID]; ok {
		return r.Result
	}
	res := s.applyOne(c)
	if res.Code == CodeOK {
		if s.req.byID == nil {
			s.req.byID = make(map[string]RequestRecord)
		}
		s.req.byID[c.RequestID] = RequestRecord{Index: s.index, Time: s.now, Result: res}
		s.req.order = append(s.req.order, c.RequestID)
	}
	return res
}

// forgetRequests drops the records older than RequestRetention.
func (s *State) forgetRequests() {
	n := 0
	for n < len(s.req.order) && s.req.byID[s.req.order[n]].Time < s.now-RequestRetention {
		delete(s.req.byID, s.req.order[n])
		n++
	}
	if n > 0 {
		s.req.order = s.req.order[n:]
	}
}

// encodeRequests writes the records in order: the end of format 6, which
// the formats before it lack.
func (s *State) encodeRequests(e *encoder) {
	e.u(uint64(len(s.req.order)))
	for _, id := range s.req.order {
		r := s.req.byID[id]
		e.str(id)
		e.u(r.Index)
		e.i(r.Time)
		e.u(r.Result.ID)
	}
}

func (s *State) decodeRequests(d *decoder) {
	n := d.count(4)
	if n == 0 {
		return
	}
	s.req.byID = make(map[string]RequestRecord, n)
	s.req.order = make([]string, 0, n)
	for range n {
		id := d.str()
		r := RequestRecord{Index: d.u(), Time: d.i()}
		r.Result.ID = d.u()
		if _, dup := s.req.byID[id]; dup || id == "" {
			d.fail("request records repeat an ID")
			return
		}
		s.req.byID[id] = r
		s.req.order = append(s.req.order, id)
	}
}

// cloneInto copies the log into c's space.
func (l *requestLog) cloneInto(c *requestLog) requestLog {
	return requestLog{byID: mapInto(c.byID, l.byID), order: sliceInto(c.order, l.order)}
}
