package stackfile

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"
	"go.yaml.in/yaml/v3"

	"shoal/api/client"
	"shoal/sched"
)

// StackLabel is the service label that names a service's stack.
const StackLabel = "shoal.stack"

// Stack is what a stack file declares, as API documents.
type Stack struct {
	Name     string
	Services []client.ServiceSpec // by name
	Networks []client.NetworkSpec // by name
}

// The file's shape. Field tags name the keys; a key without a field is
// refused. Pointers mark what may be left out so the manager's default
// applies.
type file struct {
	Version  string              `yaml:"version"`
	Services map[string]*service `yaml:"services"`
	Networks map[string]*network `yaml:"networks"`
}

type service struct {
	Image       string    `yaml:"image"`
	Command     argv      `yaml:"command"`
	Environment keyValues `yaml:"environment"`
	WorkingDir  string    `yaml:"working_dir"`
	Networks    nameList  `yaml:"networks"`
	StopGrace   *duration `yaml:"stop_grace_period"`
	Deploy      *deploy   `yaml:"deploy"`
	line        int       // of the service's key
}

type deploy struct {
	Mode           choice         `yaml:"mode"`
	Replicas       *uint32        `yaml:"replicas"`
	Labels         keyValues      `yaml:"labels"`
	UpdateConfig   *updateConfig  `yaml:"update_config"`
	RollbackConfig *updateConfig  `yaml:"rollback_config"`
	RestartPolicy  *restartPolicy `yaml:"restart_policy"`
	Placement      *placement     `yaml:"placement"`
	Resources      *resources     `yaml:"resources"`
}

type updateConfig struct {
	Parallelism     *uint32   `yaml:"parallelism"`
	Delay           duration  `yaml:"delay"`
	FailureAction   choice    `yaml:"failure_action"`
	Monitor         *duration `yaml:"monitor"`
	MaxFailureRatio ratio     `yaml:"max_failure_ratio"`
	Order           choice    `yaml:"order"`
}

type restartPolicy struct {
	Condition   choice    `yaml:"condition"`
	Delay       *duration `yaml:"delay"`
	MaxAttempts uint32    `yaml:"max_attempts"`
	Window      duration  `yaml:"window"`
}

type placement struct {
	Constraints        []constraint `yaml:"constraints"`
	Preferences        []preference `yaml:"preferences"`
	MaxReplicasPerNode uint32       `yaml:"max_replicas_per_node"`
}

type preference struct {
	Spread spread `yaml:"spread"`
}

// spread is a preference's node label, node.labels.KEY.
type spread string

func (s *spread) read(n *yaml.Node) error {
	if key, ok := strings.CutPrefix(n.Value, "node.labels."); n.Kind != yaml.ScalarNode || !ok || key == "" {
		return fmt.Errorf("%q: spread over a node label, e.g. node.labels.zone", n.Value)
	}
	*s = spread(n.Value)
	return nil
}

// choice is one of a few words; which ones depends on the key (choices).
type choice struct{ v string }

// choices are the words each key of a choice takes.
var choices = map[string][]string{
	"mode":           {"replicated", "global"},
	"condition":      {"any", "on-failure", "none"},
	"order":          {"stop-first", "start-first"},
	"failure_action": {"pause", "continue", "rollback"},
	// rollback_config.failure_action: a rollback is never rolled back
	"rollback_config.failure_action": {"pause", "continue"},
}

// ratio is a fraction from 0 to 1.
type ratio float64

func (r *ratio) read(n *yaml.Node) error {
	v, err := strconv.ParseFloat(n.Value, 64)
	if n.Kind != yaml.ScalarNode || err != nil || !(v >= 0 && v <= 1) {
		return fmt.Errorf("%q is not a fraction from 0 to 1 (0.2 = a fifth of the tasks)", n.Value)
	}
	*r = ratio(v)
	return nil
}

type resources struct {
	Reservations *reservations `yaml:"reservations"`
}

type reservations struct {
	CPUs   cpus     `yaml:"cpus"`
	Memory byteSize `yaml:"memory"`
}

type network struct {
	IPAM *ipam `yaml:"ipam"`
	line int
}

type ipam struct {
	Config []ipamConfig `yaml:"config"`
}

type ipamConfig struct {
	Subnet subnet `yaml:"subnet"`
}

// subnet is a network's CIDR.
type subnet string

func (s *subnet) read(n *yaml.Node) error {
	if _, err := netip.ParsePrefix(n.Value); n.Kind != yaml.ScalarNode || err != nil {
		return fmt.Errorf("%q is not a subnet in CIDR form, such as 10.10.1.0/24", n.Value)
	}
	*s = subnet(n.Value)
	return nil
}

// constraint is a placement constraint the scheduler can read.
type constraint string

func (c *constraint) read(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("give a constraint such as node.labels.zone==a, not a %s", kindName(n))
	}
	if _, err := sched.ParseConstraints([]string{n.Value}); err != nil {
		if errors.Is(err, sched.ErrInvalidConstraint) {
			return errors.New("invalid constraint" + strings.TrimPrefix(err.Error(), sched.ErrInvalidConstraint.Error()))
		}
		return err
	}
	*c = constraint(n.Value)
	return nil
}

// scalar is a value with its own reading of a node (a union of forms, or
// a unit); the error it returns is completed with the line and path.
type scalar interface {
	read(n *yaml.Node) error
}

// argv is a command: a list, one argument per item.
type argv []string

func (a *argv) read(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return errors.New(`give the command as a list, one argument per item, e.g. ["sleep", "1000"] (a string is not split: shoal guesses no shell quoting)`)
	}
	s, err := stringList(n)
	*a = s
	return err
}

// keyValues is compose's environment or labels: a map, or a list of
// KEY=VALUE; kept as KEY=VALUE (a map's keys in order).
type keyValues []string

func (kv *keyValues) read(n *yaml.Node) error {
	switch n.Kind {
	case yaml.SequenceNode:
		s, err := stringList(n)
		if err != nil {
			return err
		}
		for _, e := range s {
			if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
				return fmt.Errorf("%q is not KEY=VALUE", e)
			}
		}
		*kv = s
		return nil
	case yaml.MappingNode:
		var out []string
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], resolve(n.Content[i+1])
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
				return fmt.Errorf("%s: give a value (shoal does not read it from your shell)", k.Value)
			}
			out = append(out, k.Value+"="+v.Value)
		}
		slices.Sort(out)
		*kv = out
		return nil
	}
	return errors.New("give a map of KEY: VALUE or a list of KEY=VALUE")
}

// nameList is a service's networks: a list of names, or a map whose keys
// are the names (with no options); lines has each name's line.
type nameList struct {
	names []string
	lines []int
}

func (l *nameList) read(n *yaml.Node) error {
	switch n.Kind {
	case yaml.SequenceNode:
		s, err := stringList(n)
		if err != nil {
			return err
		}
		l.names = s
		for _, e := range n.Content {
			l.lines = append(l.lines, e.Line)
		}
		return nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if v := resolve(n.Content[i+1]); v.Tag != "!!null" && !(v.Kind == yaml.MappingNode && len(v.Content) == 0) {
				return &pathError{line: v.Line, path: "", msg: n.Content[i].Value + ": per-network options are not supported; list the network's name only"}
			}
			l.names = append(l.names, n.Content[i].Value)
			l.lines = append(l.lines, n.Content[i].Line)
		}
		return nil
	}
	return errors.New("give a list of network names")
}

type duration int64

func (d *duration) read(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil || v < 0 {
		return fmt.Errorf("%q is not a duration (use e.g. 500ms, 10s, 1m30s)", n.Value)
	}
	*d = duration(v)
	return nil
}

type byteSize int64

func (b *byteSize) read(n *yaml.Node) error {
	v, err := units.RAMInBytes(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil || v < 0 {
		return fmt.Errorf("%q is not a size (use bytes or e.g. 512M, 1.5G)", n.Value)
	}
	*b = byteSize(v)
	return nil
}

// cpus is a number of CPUs ("0.5"), kept in milli-cores.
type cpus int64

func (c *cpus) read(n *yaml.Node) error {
	v, err := strconv.ParseFloat(n.Value, 64)
	if n.Kind != yaml.ScalarNode || err != nil || v < 0 || v > 1e6 {
		return fmt.Errorf("%q is not a number of CPUs (e.g. 0.5 or 2)", n.Value)
	}
	*c = cpus(math.Round(v * 1000))
	return nil
}

func stringList(n *yaml.Node) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, errors.New("give a list")
	}
	out := make([]string, 0, len(n.Content))
	for _, e := range n.Content {
		e = resolve(e)
		if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
			return nil, &pathError{line: e.Line, msg: "give a list of strings; item " + strconv.Itoa(len(out)) + " is a " + kindName(e)}
		}
		out = append(out, e.Value)
	}
	return out, nil
}

// resolve follows an alias (*name) to its anchored node.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "map"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

// pathError is a mistake at a place in the file.
type pathError struct {
	line int
	path string
	msg  string
}

func (e *pathError) Error() string {
	if e.path == "" {
		return fmt.Sprintf("line %d: %s", e.line, e.msg)
	}
	return fmt.Sprintf("line %d: %s: %s", e.line, e.path, e.msg)
}

func errAt(n *yaml.Node, path, format string, args ...any) error {
	return &pathError{line: n.Line, path: path, msg: fmt.Sprintf(format, args...)}
}

var scalarType = reflect.TypeFor[scalar]()

// decode sets v from n, refusing keys v has no field for.
func decode(n *yaml.Node, v reflect.Value, path string) error {
	n = resolve(n)
	if v.Kind() == reflect.Pointer {
		if n.Tag == "!!null" {
			return nil
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return decode(n, v.Elem(), path)
	}
	if c, ok := v.Addr().Interface().(*choice); ok {
		words := choices[path[strings.LastIndexByte(path, '.')+1:]]
		if strings.HasSuffix(path, "rollback_config.failure_action") {
			words = choices["rollback_config.failure_action"]
		}
		if n.Kind != yaml.ScalarNode || !slices.Contains(words, n.Value) {
			return errAt(n, path, "%q is not one of %s", n.Value, strings.Join(words, ", "))
		}
		c.v = n.Value
		return nil
	}
	if v.CanAddr() && v.Addr().Type().Implements(scalarType) {
		if err := v.Addr().Interface().(scalar).read(n); err != nil {
			var pe *pathError
			if errors.As(err, &pe) {
				if pe.path == "" {
					pe.path = path
				}
				return pe
			}
			return errAt(n, path, "%v", err)
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return errAt(n, path, "give a map of keys, not a %s", kindName(n))
		}
		return decodeStruct(n, v, path)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return errAt(n, path, "give a map of names, not a %s", kindName(n))
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if at, dup := seen[k.Value]; dup {
				return errAt(k, join(path, k.Value), "given twice (first at line %d)", at)
			}
			seen[k.Value] = k.Line
			e := reflect.New(v.Type().Elem()).Elem()
			if err := decode(n.Content[i+1], e, join(path, k.Value)); err != nil {
				return err
			}
			if e.Kind() == reflect.Pointer && e.IsNil() {
				e.Set(reflect.New(v.Type().Elem().Elem()))
			}
			setLine(e, k.Line)
			v.SetMapIndex(reflect.ValueOf(k.Value), e)
		}
		return nil
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return errAt(n, path, "give a list, not a %s", kindName(n))
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, e := range n.Content {
			if err := decode(e, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return errAt(n, path, "give a single value, not a %s", kindName(n))
	}
	if n.Tag == "!!null" {
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(n.Value)
	case reflect.Uint32:
		x, err := strconv.ParseUint(n.Value, 10, 32)
		if err != nil {
			return errAt(n, path, "%q is not a whole number", n.Value)
		}
		v.SetUint(x)
	case reflect.Float64:
		x, err := strconv.ParseFloat(n.Value, 64)
		if err != nil {
			return errAt(n, path, "%q is not a number", n.Value)
		}
		v.SetFloat(x)
	default:
		panic("stackfile: no reading for " + v.Type().String())
	}
	return nil
}

func decodeStruct(n *yaml.Node, v reflect.Value, path string) error {
	t := v.Type()
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if at, dup := seen[k.Value]; dup {
			return errAt(k, join(path, k.Value), "given twice (first at line %d)", at)
		}
		seen[k.Value] = k.Line
		f, ok := fieldByTag(t, k.Value)
		if !ok {
			return errAt(k, join(path, k.Value), "not supported (%s takes: %s)", placeName(path), strings.Join(tags(t), ", "))
		}
		if err := decode(n.Content[i+1], v.FieldByIndex(f.Index), join(path, k.Value)); err != nil {
			return err
		}
	}
	return nil
}

// setLine records the key's line in a service or network.
func setLine(e reflect.Value, line int) {
	switch x := e.Interface().(type) {
	case *service:
		x.line = line
	case *network:
		x.line = line
	}
}

func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tag := f.Tag.Get("yaml"); tag == key && tag != "-" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func tags(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("yaml"); tag != "" && tag != "-" {
			out = append(out, tag)
		}
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// placeName says where a key is, for "(X takes: ...)".
func placeName(path string) string {
	switch {
	case path == "":
		return "the file"
	case strings.Count(path, ".") == 1 && strings.HasPrefix(path, "services."):
		return "a service"
	case strings.Count(path, ".") == 1 && strings.HasPrefix(path, "networks."):
		return "a network"
	}
	return path[strings.LastIndexByte(path, '.')+1:]
}
