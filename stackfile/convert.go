package stackfile

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"shoal/api/client"
)

// maxName is the longest service or network name the manager takes.
const maxName = 63

// Parse reads a stack file into the documents of stack name's services
// and networks (see the package contract).
func Parse(data []byte, name string) (Stack, error) {
	if !validName(name) {
		return Stack{}, fmt.Errorf("stack name %q: use letters, digits, '-' or '_'", name)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Stack{}, fmt.Errorf("not YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return Stack{}, fmt.Errorf("the file is empty: declare services: (docs/stacks.md)")
	}
	var f file
	if err := decode(doc.Content[0], reflect.ValueOf(&f).Elem(), ""); err != nil {
		return Stack{}, err
	}
	if len(f.Services) == 0 {
		return Stack{}, errAt(doc.Content[0], "services", "the file declares no service")
	}
	st := Stack{Name: name}
	for _, n := range slices.Sorted(maps.Keys(f.Networks)) {
		nw, err := convertNetwork(name, n, f.Networks[n])
		if err != nil {
			return Stack{}, err
		}
		st.Networks = append(st.Networks, nw)
	}
	for _, n := range slices.Sorted(maps.Keys(f.Services)) {
		sp, err := convertService(name, n, f.Services[n], f.Networks)
		if err != nil {
			return Stack{}, err
		}
		st.Services = append(st.Services, sp)
	}
	return st, nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// lineErr is a mistake found after decoding, at a key's line.
func lineErr(line int, path, format string, args ...any) error {
	return &pathError{line: line, path: path, msg: fmt.Sprintf(format, args...)}
}

func checkName(line int, path, stack, n string) (string, error) {
	full := stack + "_" + n
	if !validName(n) {
		return "", lineErr(line, path, "use letters, digits, '-' or '_' in the name")
	}
	if len(full) > maxName {
		return "", lineErr(line, path, "%q is longer than %d characters", full, maxName)
	}
	return full, nil
}

func convertNetwork(stack, n string, nw *network) (client.NetworkSpec, error) {
	path := "networks." + n
	full, err := checkName(nw.line, path, stack, n)
	if err != nil {
		return client.NetworkSpec{}, err
	}
	if nw.IPAM == nil || len(nw.IPAM.Config) == 0 || nw.IPAM.Config[0].Subnet == "" {
		return client.NetworkSpec{}, lineErr(nw.line, path, "give the network a subnet under ipam.config (e.g. - subnet: 10.0.1.0/24); shoal does not pick one")
	}
	if len(nw.IPAM.Config) > 1 {
		return client.NetworkSpec{}, lineErr(nw.line, path+".ipam.config", "one subnet per network")
	}
	return client.NetworkSpec{Name: full, Subnet: string(nw.IPAM.Config[0].Subnet)}, nil
}

func convertService(stack, n string, s *service, nets map[string]*network) (client.ServiceSpec, error) {
	path := "services." + n
	full, err := checkName(s.line, path, stack, n)
	if err != nil {
		return client.ServiceSpec{}, err
	}
	sp := client.ServiceSpec{Name: full, Image: s.Image, Command: s.Command, Env: s.Environment, Dir: s.WorkingDir,
		Labels: map[string]string{StackLabel: stack}}
	if len(sp.Command) == 0 && sp.Image == "" {
		return sp, lineErr(s.line, path, "give the service a command (a list: [\"sleep\", \"1000\"])")
	}
	for i, nn := range s.Networks.names {
		if _, ok := nets[nn]; !ok {
			return sp, lineErr(s.Networks.lines[i], path+".networks", "network %q is not declared under the file's networks:", nn)
		}
		sp.Networks = append(sp.Networks, stack+"_"+nn)
	}
	if s.StopGrace != nil {
		g := client.Duration(*s.StopGrace)
		sp.StopGrace = &g
	}
	d := s.Deploy
	if d == nil {
		return sp, nil
	}
	sp.Replicas = d.Replicas
	if d.Mode.v == "global" {
		if d.Replicas != nil {
			return sp, lineErr(s.line, path+".deploy.replicas", "a global service runs one task per node; it takes no replica count")
		}
		sp.Mode = "global"
	}
	for _, kv := range d.Labels {
		k, v, _ := strings.Cut(kv, "=")
		if k == StackLabel {
			return sp, lineErr(s.line, path+".deploy.labels", "%s is set by shoal to the stack's name", StackLabel)
		}
		sp.Labels[k] = v
	}
	sp.Update, sp.Rollback = convertUpdate(d.UpdateConfig), convertUpdate(d.RollbackConfig)
	if r := d.RestartPolicy; r != nil {
		sp.Restart = &client.RestartPolicy{Condition: r.Condition.v, MaxAttempts: r.MaxAttempts, Window: client.Duration(r.Window)}
		if r.Delay != nil {
			dl := client.Duration(*r.Delay)
			sp.Restart.Delay = &dl
		}
	}
	if p := d.Placement; p != nil {
		for _, c := range p.Constraints {
			sp.Constraints = append(sp.Constraints, string(c))
		}
		pl := &client.Placement{MaxReplicasPerNode: p.MaxReplicasPerNode}
		for _, pref := range p.Preferences {
			pl.Preferences = append(pl.Preferences, string(pref.Spread))
		}
		if len(pl.Preferences) > 0 || pl.MaxReplicasPerNode > 0 {
			sp.Placement = pl
		}
	}
	if r := d.Resources; r != nil && r.Reservations != nil {
		sp.Reserve = client.Resources{CPU: int64(r.Reservations.CPUs), Memory: int64(r.Reservations.Memory)}
	}
	return sp, nil
}

func convertUpdate(u *updateConfig) *client.UpdateConfig {
	if u == nil {
		return nil
	}
	c := &client.UpdateConfig{Parallelism: u.Parallelism, Delay: client.Duration(u.Delay),
		FailureAction: u.FailureAction.v, MaxFailureRatio: float64(u.MaxFailureRatio), Order: u.Order.v}
	if u.Monitor != nil {
		m := client.Duration(*u.Monitor)
		c.Monitor = &m
	}
	return c
}
