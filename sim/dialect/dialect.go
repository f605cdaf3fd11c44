package dialect

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/datadriven"
)

// Op is one directive: a command, its positional arguments and its
// key=value options, in order.
type Op struct {
	Cmd string
	Pos []string
	KV  [][2]string
}

// String prints op as a script line.
func (op Op) String() string {
	parts := append([]string{op.Cmd}, op.Pos...)
	for _, kv := range op.KV {
		parts = append(parts, kv[0]+"="+kv[1])
	}
	return strings.Join(parts, " ")
}

// Parse parses a script line.
func Parse(line string) (Op, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return Op{}, fmt.Errorf("empty directive")
	}
	op := Op{Cmd: f[0]}
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			op.KV = append(op.KV, [2]string{k, v})
			continue
		}
		op.Pos = append(op.Pos, a)
	}
	return op, nil
}

// FromData turns a datadriven directive into an Op.
func FromData(d *datadriven.TestData) Op {
	op := Op{Cmd: d.Cmd}
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 {
			op.Pos = append(op.Pos, a.Key)
			continue
		}
		op.KV = append(op.KV, [2]string{a.Key, strings.Join(a.Vals, ",")})
	}
	return op
}

// Get returns option k's value.
func (op Op) Get(k string) (string, bool) {
	for _, kv := range op.KV {
		if kv[0] == k {
			return kv[1], true
		}
	}
	return "", false
}

// Only refuses options other than keys and more positional arguments than
// pos.
func (op Op) Only(pos int, keys ...string) error {
	if len(op.Pos) > pos {
		return fmt.Errorf("%s takes at most %d argument(s), got %q", op.Cmd, pos, op.Pos)
	}
	return op.keys(keys)
}

// Want refuses options other than keys and any number of positional
// arguments but pos.
func (op Op) Want(pos int, keys ...string) error {
	if len(op.Pos) != pos {
		return fmt.Errorf("%s takes %d argument(s), got %q", op.Cmd, pos, op.Pos)
	}
	return op.keys(keys)
}

func (op Op) keys(keys []string) error {
	for _, kv := range op.KV {
		if !slices.Contains(keys, kv[0]) {
			if len(keys) == 0 {
				return fmt.Errorf("%s takes no option, got %q", op.Cmd, kv[0])
			}
			return fmt.Errorf("%s takes no option %q (it takes: %s)", op.Cmd, kv[0], strings.Join(keys, ", "))
		}
	}
	return nil
}

// Dur reads option k as a duration (def when absent).
func (op Op) Dur(k string, def time.Duration) (time.Duration, error) {
	v, ok := op.Get(k)
	if !ok {
		return def, nil
	}
	return time.ParseDuration(v)
}

// Float reads option k as a number (def when absent).
func (op Op) Float(k string, def float64) (float64, error) {
	v, ok := op.Get(k)
	if !ok {
		return def, nil
	}
	return strconv.ParseFloat(v, 64)
}

// Int reads option k as an integer (def when absent).
func (op Op) Int(k string, def int) (int, error) {
	v, ok := op.Get(k)
	if !ok {
		return def, nil
	}
	return strconv.Atoi(v)
}

// List reads option k as a comma-separated list (nil when absent or
// empty).
func (op Op) List(k string) []string {
	v, ok := op.Get(k)
	if !ok || v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// Size reads a byte count: 512, 64M, 2G.
func Size(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v * mult, err
}

// Labels reads k=v,k2=v2.
func Labels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("label %q wants key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// TaskName splits service.slot[#k] (k 0: the slot's newest task).
func TaskName(name string) (service, slot string, k int, err error) {
	service, slot, ok := strings.Cut(name, ".")
	if !ok || service == "" || slot == "" {
		return "", "", 0, fmt.Errorf("task %q: want service.slot or service.slot#k", name)
	}
	slot, kth, hasK := strings.Cut(slot, "#")
	if hasK {
		if k, err = strconv.Atoi(kth); err != nil || k < 1 {
			return "", "", 0, fmt.Errorf("task %q: #k wants a number from 1", name)
		}
	}
	return service, slot, k, nil
}

// DurationArg reads a directive's one positional duration (advance 30s).
func (op Op) DurationArg() (time.Duration, error) {
	if err := op.Want(1); err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(op.Pos[0])
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s wants a non-negative duration such as 30s, got %q", op.Cmd, op.Pos[0])
	}
	return d, nil
}

// Report is a status report's directive: report n1 web.1 running [exit=N]
// [message=…].
type Report struct {
	Node, Task, State string
	Exit              int32
	Message           string
}

// ParseReport reads a report directive.
func ParseReport(op Op) (Report, error) {
	if err := op.Want(3, "exit", "message"); err != nil {
		return Report{}, fmt.Errorf("%w: report n1 web.1 running [exit=N] [message=…]", err)
	}
	r := Report{Node: op.Pos[0], Task: op.Pos[1], State: op.Pos[2]}
	if v, ok := op.Get("exit"); ok {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return Report{}, fmt.Errorf("exit wants a number, got %q", v)
		}
		r.Exit = int32(n)
	}
	r.Message, _ = op.Get("message")
	return r, nil
}

// Seq is an assignment sequence as a sync directive names it: a number,
// or the node's current sequence plus Delta.
type Seq struct {
	Current bool
	N       uint64 // the number (Current false)
	Delta   int64  // added to the current sequence (Current true)
}

// Of returns the sequence, given the node's current one.
func (s Seq) Of(current uint64) uint64 {
	if s.Current {
		return uint64(int64(current) + s.Delta)
	}
	return s.N
}

// ParseSeqs reads a comma-separated list of sequences: 7, current,
// current-1, current+1.
func ParseSeqs(v string) ([]Seq, error) {
	var out []Seq
	for _, x := range strings.Split(v, ",") {
		if rest, ok := strings.CutPrefix(x, "current"); ok {
			s := Seq{Current: true}
			if rest != "" {
				d, err := strconv.ParseInt(rest, 10, 64)
				if err != nil || (rest[0] != '-' && rest[0] != '+') {
					return nil, fmt.Errorf("want a number, current, current-N or current+N, got %q", x)
				}
				s.Delta = d
			}
			out = append(out, s)
			continue
		}
		n, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("want a number, current, current-N or current+N, got %q", x)
		}
		out = append(out, Seq{N: n})
	}
	return out, nil
}
