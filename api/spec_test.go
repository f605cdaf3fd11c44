package api

import (
	"strings"
	"testing"

	"shoal/api/client"
)

// A network named twice in a spec would give every task two addresses on
// it (seen: `--network front --network front`); it is refused, naming the
// network and the field.
func TestSpecRefusesANetworkTwice(t *testing.T) {
	d := client.ServiceSpec{Name: "web", Command: []string{"sleep", "1"}, Networks: []string{"front", "back", "front"}}
	_, err := toSpec(&d)
	ae, ok := err.(*apiError)
	if !ok || ae.status != 422 || ae.field != "networks" || !strings.Contains(ae.msg, `network "front" is listed twice`) {
		t.Fatalf("toSpec: %#v; want a 422 on networks naming front", err)
	}
	d.Networks = []string{"front", "back"}
	if _, err := toSpec(&d); err != nil {
		t.Fatalf("two networks: %v", err)
	}
}
