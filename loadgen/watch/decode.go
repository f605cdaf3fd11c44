package watch

import (
	"time"

	"shoal/api/client"
	"shoal/internal/jsoncodec"
)

// Decoding the stream's lines with the JSON codec was about a third of the
// loadgen's CPU in a ramp (perf/NOTEBOOK.md). Most lines are task events
// the server writes in one fixed shape (api/eventjson.go): the keys in
// client.Event's and client.Task's order, no spaces, the optional ones left
// out when empty. A Decoder reads a line of exactly that shape itself, with
// every string plain (printable ASCII, no escapes; a task's message may
// hold JSON's short escapes, as the server escapes the quotes around a
// network's name), and hands every other line to the codec; either way ev
// ends as jsoncodec.Unmarshal makes it (TestDecoderIsTheCodecs). The
// strings that repeat from line to line (topic, type, service, node name,
// network, desired, state, message) are shared.

// Decoder decodes event lines; one per stream (it is not safe for
// concurrent use).
type Decoder struct {
	names map[string]string // interned repeated strings
}

// NewDecoder returns a decoder.
func NewDecoder() *Decoder { return &Decoder{names: map[string]string{}} }

// maxNames bounds the interned strings (services, node names, networks,
// messages and the enums' names are far fewer in every run).
const maxNames = 1 << 17

// Decode decodes line into ev (zero on entry), as the codec would.
func (d *Decoder) Decode(line []byte, ev *client.Event) error {
	if d.fast(line, ev) {
		return nil
	}
	*ev = client.Event{}
	return jsoncodec.Unmarshal(line, ev)
}

// name returns b as a string, shared with earlier lines' equal ones.
func (d *Decoder) name(b []byte) string {
	switch string(b) { // most lines' words, without a map read
	case "task":
		return "task"
	case "state":
		return "state"
	case "running":
		return "running"
	case "pending":
		return "pending"
	case "assigned":
		return "assigned"
	case "starting":
		return "starting"
	case "shutdown":
		return "shutdown"
	}
	if s, ok := d.names[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(d.names) < maxNames {
		d.names[s] = s
	}
	return s
}

// fast decodes a line of the fixed shape into ev; false (ev partly set)
// for any other line.
func (d *Decoder) fast(line []byte, ev *client.Event) bool {
	p := parser{b: line}
	if !p.lit(`{"index":`) {
		return false
	}
	index, ok := p.str()
	if !ok || !p.lit(`,"group":`) {
		return false
	}
	group, ok := p.uint(63)
	if !ok || !p.lit(`,"raft":`) {
		return false
	}
	raft, ok := p.uint(64)
	if !ok || !p.lit(`,"topic":`) {
		return false
	}
	topic, ok := p.str()
	if !ok || !p.lit(`,"type":`) {
		return false
	}
	typ, ok := p.str()
	if !ok || !p.lit(`,"key":`) {
		return false
	}
	key, ok := p.str()
	if !ok {
		return false
	}
	// The index and the key come out of one string (one allocation).
	var buf [64]byte
	both := string(append(append(buf[:0], index...), key...))
	ev.Index, ev.Key = both[:len(index)], both[len(index):]
	ev.Group, ev.Raft = int(group), raft
	ev.Topic, ev.Type = d.name(topic), d.name(typ)
	if p.lit(`}`) {
		return p.end()
	}
	if !p.lit(`,"task":`) {
		return false
	}
	t := &client.Task{}
	if !d.task(&p, t, key, ev.Key, nil) || !p.lit(`}`) || !p.end() {
		return false
	}
	ev.Task = t
	return true
}

// task reads a task object (api/eventjson.go's appendTaskEvent) into t;
// key and keyStr are the event's key, whose string the task's equal ID
// shares. With ps (a list's page), the ID and the addresses' strings come
// out of the page's strings, and the addresses out of its slab.
func (d *Decoder) task(p *parser, t *client.Task, key []byte, keyStr string, ps *pageStrings) bool {
	if !p.lit(`{"id":`) {
		return false
	}
	id, ok := p.str()
	if !ok || !p.lit(`,"service":`) {
		return false
	}
	switch {
	case ps != nil:
		ps.add(&t.ID, id)
	case string(id) == string(key):
		t.ID = keyStr
	default:
		t.ID = string(id)
	}
	svc, ok := p.str()
	if !ok || !p.lit(`,"slot":`) {
		return false
	}
	t.Service = d.name(svc)
	slot, ok := p.uint(32)
	if !ok || !p.lit(`,"spec_version":`) {
		return false
	}
	t.Slot = uint32(slot)
	ver, ok := p.uint(32)
	if !ok {
		return false
	}
	t.SpecVersion = uint32(ver)
	if p.lit(`,"node":`) {
		n, ok := p.uint(32)
		if !ok {
			return false
		}
		t.Node = uint32(n)
	}
	if p.lit(`,"node_name":`) {
		s, ok := p.str()
		if !ok {
			return false
		}
		t.NodeName = d.name(s)
	}
	if !p.lit(`,"desired":`) {
		return false
	}
	desired, ok := p.str()
	if !ok || !p.lit(`,"state":`) {
		return false
	}
	t.Desired = d.name(desired)
	state, ok := p.str()
	if !ok {
		return false
	}
	t.State = d.name(state)
	if p.lit(`,"exit_code":`) {
		neg := p.lit(`-`)
		n, ok := p.uint(31)
		if !ok || neg && n == 0 {
			return false
		}
		if neg {
			t.ExitCode = -int32(n)
		} else {
			t.ExitCode = int32(n)
		}
	}
	if p.lit(`,"message":`) {
		// A message often names something in quotes, which the server
		// escapes; one message repeats over many tasks.
		var buf [256]byte
		s, ok := p.escaped(buf[:0])
		if !ok {
			return false
		}
		t.Message = d.name(s)
	}
	if !p.lit(`,"since":`) {
		return false
	}
	since, ok := p.quoted()
	if !ok || !utcTime(since[1:len(since)-1], &t.Since) && t.Since.UnmarshalJSON(since) != nil {
		return false
	}
	if ps != nil && p.lit(`,"addresses":[`) {
		first := len(ps.addrs)
		for {
			if !p.lit(`{"network":`) || len(ps.addrs) == cap(ps.addrs) {
				return false // (a full slab would move the strings' targets)
			}
			nw, ok := p.str()
			if !ok || !p.lit(`,"addr":`) {
				return false
			}
			addr, ok := p.str()
			if !ok {
				return false
			}
			ps.addrs = append(ps.addrs, client.TaskAddress{Network: d.name(nw), Released: p.lit(`,"released":true`)})
			ps.add(&ps.addrs[len(ps.addrs)-1].Addr, addr)
			if !p.lit(`}`) {
				return false
			}
			if p.lit(`]`) {
				break
			}
			if !p.lit(`,`) {
				return false
			}
		}
		t.Addresses = ps.addrs[first:len(ps.addrs):len(ps.addrs)]
	} else if p.lit(`,"addresses":[`) {
		for {
			if !p.lit(`{"network":`) {
				return false
			}
			nw, ok := p.str()
			if !ok || !p.lit(`,"addr":`) {
				return false
			}
			addr, ok := p.str()
			if !ok {
				return false
			}
			a := client.TaskAddress{Network: d.name(nw), Addr: string(addr)}
			if p.lit(`,"released":true`) {
				a.Released = true
			}
			if !p.lit(`}`) {
				return false
			}
			t.Addresses = append(t.Addresses, a)
			if p.lit(`]`) {
				break
			}
			if !p.lit(`,`) {
				return false
			}
		}
	}
	return p.lit(`}`)
}

// utcTime reads b as the codec writes a UTC time (RFC 3339, the fraction
// without its trailing zeros, Z) into t as time.Time.UnmarshalJSON would;
// false for anything else. (UnmarshalJSON was a sixth of a list page's
// decoding.)
func utcTime(b []byte, t *time.Time) bool {
	// 2006-01-02T15:04:05[.fffffffff]Z
	if len(b) < 20 || len(b) > 30 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[len(b)-1] != 'Z' {
		return false
	}
	num := func(i, n int) (int, bool) {
		v := 0
		for _, c := range b[i : i+n] {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 2)
	day, ok3 := num(8, 2)
	hour, ok4 := num(11, 2)
	minute, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || month < 1 || month > 12 || day < 1 ||
		day > daysIn(time.Month(month), year) || hour > 23 || minute > 59 || sec > 59 {
		return false
	}
	nsec := 0
	if frac := b[19 : len(b)-1]; len(frac) > 0 {
		if len(frac) < 2 || frac[0] != '.' {
			return false
		}
		n, ok := num(20, len(frac)-1)
		if !ok {
			return false
		}
		for range 10 - len(frac) {
			n *= 10
		}
		nsec = n
	}
	*t = time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	return true
}

// daysIn is the number of days of month in year.
func daysIn(m time.Month, year int) int {
	return time.Date(year, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// parser reads a line from its start; every method takes nothing and
// returns false when what it expects is not next.
type parser struct {
	b []byte
	i int
}

// lit takes s if it comes next.
func (p *parser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// end says whether the line is all read.
func (p *parser) end() bool { return p.i == len(p.b) }

// str takes a string whose bytes are all plain (printable ASCII but the
// quote and the backslash: the codec reads them as they are) and returns
// its bytes.
func (p *parser) str() ([]byte, bool) {
	q, ok := p.quoted()
	if !ok {
		return nil, false
	}
	return q[1 : len(q)-1], true
}

// escaped is str that also takes the escapes of a quote, a backslash, a
// slash and the control characters \b \f \n \r \t (not \u), and returns
// the string's bytes unescaped: appended to buf when it has escapes.
func (p *parser) escaped(buf []byte) ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	start, esc := p.i+1, false
	for j := start; j < len(p.b); j++ {
		c := p.b[j]
		switch {
		case c == '"':
			p.i = j + 1
			if !esc {
				return p.b[start:j], true
			}
			return buf, true
		case c == '\\':
			if j+1 == len(p.b) {
				return nil, false
			}
			if !esc {
				buf, esc = append(buf, p.b[start:j]...), true
			}
			j++
			switch p.b[j] {
			case '"', '\\', '/':
				buf = append(buf, p.b[j])
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			default:
				return nil, false
			}
		case c < 0x20 || c >= 0x7f:
			return nil, false
		case esc:
			buf = append(buf, c)
		}
	}
	return nil, false
}

// quoted is str with the quotes.
func (p *parser) quoted() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	for j := p.i + 1; j < len(p.b); j++ {
		c := p.b[j]
		if c == '"' {
			q := p.b[p.i : j+1]
			p.i = j + 1
			return q, true
		}
		if c < 0x20 || c >= 0x7f || c == '\\' {
			return nil, false
		}
	}
	return nil, false
}

// uint takes a JSON number that is an unsigned integer below 1<<bits (no
// sign, no leading zero, no fraction or exponent: what the codec reads
// into an integer field as it is).
func (p *parser) uint(bits uint) (uint64, bool) {
	j := p.i
	var n uint64
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		if j-p.i == 19 { // 20 digits may overflow: not worth the care
			return 0, false
		}
		n = n*10 + uint64(p.b[j]-'0')
		j++
	}
	if j == p.i || p.b[p.i] == '0' && j-p.i > 1 {
		return 0, false
	}
	if j < len(p.b) && (p.b[j] == '.' || p.b[j] == 'e' || p.b[j] == 'E') {
		return 0, false
	}
	if bits < 64 && n >= 1<<bits {
		return 0, false
	}
	p.i = j
	return n, true
}
