package sched

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
)

// Field is the node attribute a constraint compares.
type Field uint8

// Constraint fields.
const (
	FieldID       Field = iota // node.id
	FieldHostname              // node.hostname
	FieldRole                  // node.role
	FieldLabel                 // node.labels.<key>
)

func (f Field) String() string {
	switch f {
	case FieldID:
		return "node.id"
	case FieldHostname:
		return "node.hostname"
	case FieldRole:
		return "node.role"
	case FieldLabel:
		return "node.labels"
	}
	return "Field(" + strconv.Itoa(int(f)) + ")"
}

// Op is a constraint's comparison.
type Op uint8

// Constraint operators.
const (
	OpEq Op = iota // ==
	OpNe           // !=
)

func (o Op) String() string {
	switch o {
	case OpEq:
		return "=="
	case OpNe:
		return "!="
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// Constraint is one parsed placement constraint. Comparisons are exact
// (case-sensitive). A node without the label satisfies node.labels.K!=V
// and fails node.labels.K==V, as in SwarmKit.
type Constraint struct {
	Field Field
	Key   string // label key, for FieldLabel
	Op    Op
	Value string // compared value; for FieldRole "manager" or "worker"
	ID    uint32 // for FieldID: Value parsed
	Role  Role   // for FieldRole: Value parsed
}

// String renders the constraint in the syntax ParseConstraint accepts.
func (c Constraint) String() string {
	f := c.Field.String()
	if c.Field == FieldLabel {
		f += "." + c.Key
	}
	return f + c.Op.String() + c.Value
}

// ParseConstraint parses "node.id==x", "node.hostname!=y",
// "node.role==manager", "node.labels.K==V" or "node.labels.K!=V"; spaces
// around the operator are allowed. Errors wrap ErrInvalidConstraint.
func ParseConstraint(s string) (Constraint, error) {
	bad := func(format string, args ...any) (Constraint, error) {
		return Constraint{}, fmt.Errorf("%w %q: %s", ErrInvalidConstraint, s, fmt.Sprintf(format, args...))
	}
	eq, ne := strings.Index(s, "=="), strings.Index(s, "!=")
	var c Constraint
	var i int
	switch {
	case eq < 0 && ne < 0:
		if strings.Contains(s, "=") {
			return bad("use == or != to compare, not a single =")
		}
		return bad("no operator; want <field>==<value> or <field>!=<value>")
	case ne < 0 || (eq >= 0 && eq < ne):
		c.Op, i = OpEq, eq
	default:
		c.Op, i = OpNe, ne
	}
	field := strings.TrimSpace(s[:i])
	c.Value = strings.TrimSpace(s[i+2:])
	switch {
	case field == "":
		return bad("missing field before %s", c.Op)
	case c.Value == "":
		return bad("missing value after %s", c.Op)
	case strings.ContainsAny(c.Value, "=!"):
		return bad("value %q contains an operator; use one == or != per constraint", c.Value)
	case strings.ContainsAny(field, " \t"):
		return bad("field %q contains a space", field)
	}
	switch {
	case field == "node.id":
		c.Field = FieldID
		id, err := strconv.ParseUint(c.Value, 10, 32)
		if err != nil {
			return bad("node.id must be a node number, got %q", c.Value)
		}
		c.ID = uint32(id)
	case field == "node.hostname":
		c.Field = FieldHostname
	case field == "node.role":
		c.Field = FieldRole
		switch c.Value {
		case "manager":
			c.Role = RoleManager
		case "worker":
			c.Role = RoleWorker
		default:
			return bad("node.role must be manager or worker, got %q", c.Value)
		}
	case strings.HasPrefix(field, "node.labels."):
		c.Field = FieldLabel
		c.Key = field[len("node.labels."):]
		if c.Key == "" {
			return bad("missing label key after node.labels.")
		}
	default:
		return bad("unknown field %q; want node.id, node.hostname, node.role or node.labels.<key>", field)
	}
	return c, nil
}

// ParseConstraints parses each string with ParseConstraint.
func ParseConstraints(ss []string) ([]Constraint, error) {
	cs := make([]Constraint, 0, len(ss))
	for _, s := range ss {
		c, err := ParseConstraint(s)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// MustParseConstraints is ParseConstraints for constant input; it panics on
// an error.
func MustParseConstraints(ss ...string) []Constraint {
	cs, err := ParseConstraints(ss)
	if err != nil {
		panic(err)
	}
	return cs
}

// filter narrows cand (a set of rows) to the rows that satisfy c.
func (t *Table) filter(c Constraint, cand *roaring.Bitmap) {
	switch c.Field {
	case FieldID:
		r, ok := t.row[c.ID]
		in := ok && cand.Contains(uint32(r))
		if c.Op == OpEq {
			cand.Clear()
			if in {
				cand.Add(uint32(r))
			}
		} else if in {
			cand.Remove(uint32(r))
		}
	case FieldHostname:
		m := t.scratch.match
		m.Clear()
		for r, h := range t.hostname {
			if h == c.Value && t.live[r] {
				m.Add(uint32(r))
			}
		}
		t.narrow(cand, m, c.Op)
	case FieldRole:
		t.narrow(cand, t.roles[roleIndex(c.Role)], c.Op)
	case FieldLabel:
		t.narrow(cand, t.labelRows(c.Key, c.Value), c.Op)
	}
}

// narrow keeps the rows of cand in m (OpEq) or not in m (OpNe); m may be nil.
func (t *Table) narrow(cand, m *roaring.Bitmap, op Op) {
	switch {
	case m == nil && op == OpEq:
		cand.Clear()
	case m == nil:
	case op == OpEq:
		cand.And(m)
	default:
		cand.AndNot(m)
	}
}

// matches reports whether row r satisfies c.
func (t *Table) matches(c Constraint, r int32) bool {
	var eq bool
	switch c.Field {
	case FieldID:
		eq = t.id[r] == c.ID
	case FieldHostname:
		eq = t.hostname[r] == c.Value
	case FieldRole:
		eq = roleIndex(t.role[r]) == roleIndex(c.Role)
	case FieldLabel:
		v, ok := t.labels[r][c.Key]
		eq = ok && v == c.Value
	}
	return eq == (c.Op == OpEq)
}

// MatchNode reports whether a node with these attributes satisfies c (the
// same rule the table's filters apply), for callers that hold node records
// rather than a Table: a global service's eligibility, for one.
func (c Constraint) MatchNode(id uint32, hostname, role string, labels map[string]string) bool {
	var eq bool
	switch c.Field {
	case FieldID:
		eq = id == c.ID
	case FieldHostname:
		eq = hostname == c.Value
	case FieldRole:
		eq = role == c.Value
	case FieldLabel:
		v, ok := labels[c.Key]
		eq = ok && v == c.Value
	}
	return eq == (c.Op == OpEq)
}
