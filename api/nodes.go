package api

import (
	"maps"
	"strconv"

	"github.com/valyala/fasthttp"

	"shoal/api/client"
	routing "shoal/route"
	"shoal/statemachine"
)

// nodeDocs renders the listed nodes (all when ids is nil) with their live
// task counts summed over the service groups.
func (s *Server) nodeDocs(ids []statemachine.NodeID) ([]client.Node, []uint64, error) {
	var docs []client.Node
	pos := map[statemachine.NodeID]int{}
	cur, err := s.read([]int{routing.ClusterGroup}, func(_ int, st *statemachine.State) {
		if ids == nil {
			ids = st.NodeIDs()
		}
		for _, id := range ids {
			if n := st.Node(id); n != nil {
				pos[id] = len(docs)
				docs = append(docs, renderNode(n))
			}
		}
	})
	if err != nil {
		return nil, nil, err
	}
	cur2, err := s.read(s.serviceGroups(), func(_ int, st *statemachine.State) {
		for id, i := range pos {
			docs[i].Tasks += liveTasks(st, id)
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return docs, cur.Merge(cur2), nil
}

func (s *Server) listNodes(ctx *fasthttp.RequestCtx, _ []string) error {
	if err := s.waitFor(ctx); err != nil {
		return err
	}
	docs, cur, err := s.nodeDocs(nil)
	if err != nil {
		return err
	}
	if docs == nil {
		docs = []client.Node{}
	}
	return s.reply(ctx, fasthttp.StatusOK, cur, client.List[client.Node]{Items: docs})
}

func parseNodeID(arg string) (statemachine.NodeID, error) {
	n, err := strconv.ParseUint(arg, 10, 32)
	if err != nil || n == 0 {
		return 0, notFound("node %q does not exist (node IDs are the numbers `node ls` shows)", arg)
	}
	return statemachine.NodeID(n), nil
}

func (s *Server) getNode(ctx *fasthttp.RequestCtx, args []string) error {
	id, err := parseNodeID(args[0])
	if err != nil {
		return err
	}
	if err := s.waitFor(ctx); err != nil {
		return err
	}
	docs, cur, err := s.nodeDocs([]statemachine.NodeID{id})
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		return notFound("node %d does not exist", id)
	}
	return s.reply(ctx, fasthttp.StatusOK, cur, docs[0])
}

func (s *Server) updateNode(ctx *fasthttp.RequestCtx, args []string) error {
	id, err := parseNodeID(args[0])
	if err != nil {
		return err
	}
	var u client.NodeUpdate
	if err := decodeJSON(ctx, &u); err != nil {
		return err
	}
	if u.Availability != nil {
		a, err := parseEnum("availability", *u.Availability, statemachine.AvailActive,
			statemachine.AvailActive, statemachine.AvailPause, statemachine.AvailDrain)
		if err != nil {
			return err
		}
		if _, err := s.submit(ctx, statemachine.Command{Kind: statemachine.CmdSetAvailability, Node: id, Availability: a}); err != nil {
			return err
		}
	}
	if u.Labels != nil {
		var spec *statemachine.Node
		if _, err := s.read([]int{routing.ClusterGroup}, func(_ int, st *statemachine.State) {
			if n := st.Node(id); n != nil {
				c := *n
				spec = &c
			}
		}); err != nil {
			return err
		}
		if spec == nil {
			return notFound("node %d does not exist", id)
		}
		spec.Labels = maps.Clone(*u.Labels)
		if _, err := s.submit(ctx, statemachine.Command{Kind: statemachine.CmdUpsertNode, NodeSpec: spec}); err != nil {
			return err
		}
	}
	docs, cur, err := s.nodeDocs([]statemachine.NodeID{id})
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		return notFound("node %d does not exist", id)
	}
	return s.reply(ctx, fasthttp.StatusOK, cur, docs[0])
}

func (s *Server) removeNode(ctx *fasthttp.RequestCtx, args []string) error {
	id, err := parseNodeID(args[0])
	if err != nil {
		return err
	}
	if _, err := s.submit(ctx, statemachine.Command{Kind: statemachine.CmdRemoveNode, Node: id}); err != nil {
		return err
	}
	cur, err := s.read(nil, func(int, *statemachine.State) {})
	if err != nil {
		return err
	}
	return s.reply(ctx, fasthttp.StatusOK, cur, map[string]any{"id": id, "removed": true})
}
