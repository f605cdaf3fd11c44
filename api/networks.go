package api

import (
	"slices"
	"strings"

	"github.com/valyala/fasthttp"

	"shoal/api/client"
	routing "shoal/route"
	"shoal/statemachine"
)

// networkDocs renders the networks (all, or the one named) with address
// counts: size from the cluster group, held and quarantined summed over the
// service groups that allocate from it.
func (s *Server) networkDocs(name string) ([]client.Network, []uint64, error) {
	var docs []client.Network
	cur, err := s.read([]int{routing.ClusterGroup}, func(_ int, st *statemachine.State) {
		for _, id := range st.NetworkIDs() {
			nw := st.Network(id)
			if name != "" && nw.Name != name {
				continue
			}
			d := client.Network{ID: uint32(nw.ID), Spec: client.NetworkSpec{Name: nw.Name, Subnet: nw.Subnet,
				Reserved: slices.Clone(nw.Reserved)}}
			if p := st.Pool(id); p != nil {
				d.Size = p.Size()
			}
			docs = append(docs, d)
		}
	})
	if err != nil {
		return nil, nil, err
	}
	cur2, err := s.read(s.serviceGroups(), func(_ int, st *statemachine.State) {
		for i := range docs {
			if p := st.Pool(statemachine.NetworkID(docs[i].ID)); p != nil {
				docs[i].Held += p.Held()
				docs[i].Quarantined += p.Quarantined()
			}
		}
	})
	if err != nil {
		return nil, nil, err
	}
	for i := range docs {
		docs[i].Free = max(docs[i].Size-docs[i].Held-docs[i].Quarantined, 0)
	}
	return docs, cur.Merge(cur2), nil
}

func (s *Server) listNetworks(ctx *fasthttp.RequestCtx, _ []string) error {
	if err := s.waitFor(ctx); err != nil {
		return err
	}
	docs, cur, err := s.networkDocs("")
	if err != nil {
		return err
	}
	if docs == nil {
		docs = []client.Network{}
	}
	return s.reply(ctx, fasthttp.StatusOK, cur, client.List[client.Network]{Items: docs})
}

func (s *Server) getNetwork(ctx *fasthttp.RequestCtx, args []string) error {
	if err := s.waitFor(ctx); err != nil {
		return err
	}
	docs, cur, err := s.networkDocs(args[0])
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		return notFound("network %q does not exist", args[0])
	}
	return s.reply(ctx, fasthttp.StatusOK, cur, docs[0])
}

func (s *Server) createNetwork(ctx *fasthttp.RequestCtx, _ []string) error {
	var d client.NetworkSpec
	if err := decodeJSON(ctx, &d); err != nil {
		return err
	}
	if d.Name == "" {
		return invalidSpec("name", "a network needs a name")
	}
	if d.Subnet == "" {
		return invalidSpec("subnet", "network %q needs a subnet in CIDR form, e.g. 10.0.0.0/24", d.Name)
	}
	for _, r := range d.Reserved {
		// The state machine reads "A-" as A alone; a range needs both
		// ends (checked here, so what the log already holds replays as
		// it was applied).
		if first, last, ok := strings.Cut(r, "-"); ok && (strings.TrimSpace(first) == "" || strings.TrimSpace(last) == "") {
			return invalidSpec("reserved", "network %q: reserved range %q is not an address or first-last range", d.Name, r)
		}
	}
	res, err := s.submit(ctx, statemachine.Command{Kind: statemachine.CmdReserveNetworkID})
	if err != nil {
		return err
	}
	cmd := statemachine.Command{Kind: statemachine.CmdCreateNetwork, NetworkSpec: &statemachine.Network{
		ID: statemachine.NetworkID(res.ID), Name: d.Name, Subnet: d.Subnet, Reserved: d.Reserved}}
	if _, err := s.submit(ctx, cmd); err != nil {
		return err
	}
	docs, cur, err := s.networkDocs(d.Name)
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		return notFound("network %q was created but is not visible yet; list networks again", d.Name)
	}
	return s.reply(ctx, fasthttp.StatusCreated, cur, docs[0])
}

func (s *Server) removeNetwork(ctx *fasthttp.RequestCtx, args []string) error {
	if _, err := s.submit(ctx, statemachine.Command{Kind: statemachine.CmdRemoveNetwork, Name: args[0]}); err != nil {
		return err
	}
	cur, err := s.read(nil, func(int, *statemachine.State) {})
	if err != nil {
		return err
	}
	return s.reply(ctx, fasthttp.StatusOK, cur, map[string]any{"name": args[0], "removed": true})
}
