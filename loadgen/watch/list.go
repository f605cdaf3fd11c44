package watch

import (
	"bytes"

	"shoal/api/client"
	"shoal/internal/jsoncodec"
)

// A resync reads the whole task list (a hundred pages of 10,000 tasks in a
// million-task ramp), and decoding those pages with the JSON codec was
// about a sixth of the loadgen's CPU there (perf/NOTEBOOK.md). The server
// writes a page in one fixed shape (api/tasks.go: the codec's encoding of
// client.List[client.Task], then a newline): {"items":[task,...]} with
// ,"next_token":"..." before the closing brace when more follow, every
// task in the shape of an event's task (Decoder.task; a list's tasks have
// no history). A ListDecoder reads a page of exactly that shape itself,
// and hands any other body to the codec; either way l ends as
// jsoncodec.Unmarshal makes it (TestListDecoderIsTheCodecs). The repeated
// strings are shared as Decoder shares them, across the pages of a
// resync.

// ListDecoder decodes task list pages; one per resync (it is not safe for
// concurrent use).
type ListDecoder struct {
	d  Decoder
	ps pageStrings
}

// pageStrings gathers the bytes of a page's strings that do not repeat
// (the tasks' IDs, the addresses) into one string made at the page's end,
// and holds the page's addresses in one slab: a page's decoding was mostly
// allocations, three per task.
type pageStrings struct {
	buf   []byte
	refs  []strRef
	addrs []client.TaskAddress
}

// strRef is a string to set to buf[start:end] once the page is read.
type strRef struct {
	to         *string
	start, end int
}

// add sets *to to b's bytes at the page's end.
func (ps *pageStrings) add(to *string, b []byte) {
	ps.refs = append(ps.refs, strRef{to, len(ps.buf), len(ps.buf) + len(b)})
	ps.buf = append(ps.buf, b...)
}

// done sets the strings added.
func (ps *pageStrings) done() {
	all := string(ps.buf)
	for _, r := range ps.refs {
		*r.to = all[r.start:r.end]
	}
}

// NewListDecoder returns a list decoder.
func NewListDecoder() *ListDecoder {
	return &ListDecoder{d: Decoder{names: map[string]string{}}}
}

// Decode decodes the page body into l (zero on entry), as the codec would.
func (ld *ListDecoder) Decode(body []byte, l *client.List[client.Task]) error {
	if ld.fast(body, l) {
		return nil
	}
	*l = client.List[client.Task]{}
	return jsoncodec.Unmarshal(body, l)
}

// taskStart begins every task (addrStart every address) of a page (and nothing else in one of the
// fixed shape: no string holds a quote unescaped).
var taskStart, addrStart = []byte(`{"id":`), []byte(`{"network":`)

// fast decodes a page of the fixed shape into l; false (l partly set) for
// any other body.
func (ld *ListDecoder) fast(body []byte, l *client.List[client.Task]) bool {
	p := parser{b: body}
	if !p.lit(`{"items":[`) {
		return false
	}
	// One allocation for the page's tasks, one for its addresses: every
	// task starts with taskStart, every address with addrStart. Neither
	// grows (the page's strings point into them).
	l.Items = make([]client.Task, 0, bytes.Count(body, taskStart))
	ps := &ld.ps
	ps.buf, ps.refs = ps.buf[:0], ps.refs[:0]
	ps.addrs = make([]client.TaskAddress, 0, bytes.Count(body, addrStart))
	defer func() { clear(ps.refs); ps.addrs = nil }() // (the page's values are the caller's)
	if !p.lit(`]`) {
		for {
			if len(l.Items) == cap(l.Items) {
				return false
			}
			l.Items = append(l.Items, client.Task{})
			if !ld.d.task(&p, &l.Items[len(l.Items)-1], nil, "", ps) {
				return false
			}
			if p.lit(`]`) {
				break
			}
			if !p.lit(`,`) {
				return false
			}
		}
	}
	if p.lit(`,"next_token":`) {
		tok, ok := p.str()
		if !ok {
			return false
		}
		l.NextToken = string(tok)
	}
	if !p.lit(`}`) {
		return false
	}
	for ; p.i < len(p.b); p.i++ { // the codec takes white space after the value
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
		default:
			return false
		}
	}
	ps.done()
	return true
}
