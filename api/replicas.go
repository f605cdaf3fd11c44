package api

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/api/client"
	"shoal/cluster"
	routing "shoal/route"
	"shoal/statemachine"
)

// Replicas lists every group's members as this replica applied them and
// adds or removes a replica in every group. Errors wrap
// cluster.ErrMembership, cluster.ErrNoReplica or cluster.ErrNoQuorum. The
// engine implements it.
type Replicas interface {
	Membership() []cluster.GroupMembers
	AddReplica(ctx context.Context, id uint64, raftAddr string) error
	RemoveReplica(ctx context.Context, id uint64) error
}

// membershipTimeout bounds one membership change of every group.
const membershipTimeout = 30 * time.Second

// listReplicas answers GET /v1/replicas: every group's members as this
// manager applied them, with the API addresses the managers recorded.
func (s *Server) listReplicas(ctx *fasthttp.RequestCtx, _ []string) error {
	var apis map[uint64]string
	_ = s.reads.ReadLocal(routing.ClusterGroup, func(st *statemachine.State) { apis = st.Managers() })
	doc := client.Replicas{}
	for _, gm := range s.replicas.Membership() {
		g := client.GroupMembers{Group: gm.Group}
		for _, id := range slices.Sorted(maps.Keys(gm.Members)) {
			g.Members = append(g.Members, id)
			if gm.Group == routing.ClusterGroup {
				doc.Replicas = append(doc.Replicas, client.Replica{ID: id, RaftAddr: gm.Members[id], APIAddr: apis[id]})
			}
		}
		doc.Groups = append(doc.Groups, g)
	}
	return s.reply(ctx, fasthttp.StatusOK, nil, doc)
}

// addReplica answers POST /v1/replicas: add a replica to the membership
// of every group (what a TLS join does as part of the join; without TLS,
// `serve --insecure --join` calls this).
func (s *Server) addReplica(ctx *fasthttp.RequestCtx, _ []string) error {
	var req client.Replica
	if err := decodeJSON(ctx, &req); err != nil {
		return err
	}
	if err := s.sameGroups(req.Groups); err != nil {
		return err
	}
	if err := s.addMember(req.ID, req.RaftAddr, ctx.RemoteIP().String()); err != nil {
		return err
	}
	return s.listReplicas(ctx, nil)
}

// sameGroups refuses a joining replica whose service group count is not
// the cluster's: it would never become ready (0: an older joiner, not
// checked).
func (s *Server) sameGroups(groups int) error {
	if have := s.reads.Groups(); groups != 0 && groups != have {
		return errorf(fasthttp.StatusConflict, client.CodeConflict,
			"this cluster has %d service groups and the joining replica was started with --groups %d: start it with --groups %d (the count is fixed when the cluster is created)",
			have, groups, have)
	}
	return nil
}

func (s *Server) addMember(id uint64, raftAddr, from string) error {
	if id == 0 || raftAddr == "" {
		return badRequest("adding a replica needs its ID (1 or more) and its Raft address")
	}
	c, cancel := context.WithTimeout(context.Background(), membershipTimeout)
	defer cancel()
	if err := s.replicas.AddReplica(c, id, raftAddr); err != nil {
		return err
	}
	s.cfg.Logf("api: replica %d (Raft %s) added to every group, from %s", id, raftAddr, from)
	return nil
}

// removeReplica answers DELETE /v1/replicas/ID: remove a replica from
// every group and forget its API address.
func (s *Server) removeReplica(ctx *fasthttp.RequestCtx, args []string) error {
	id, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil || id == 0 {
		return badRequest("replica ID %q: want a number, 1 or more (see `shoal replica ls`)", args[0])
	}
	c, cancel := context.WithTimeout(context.Background(), membershipTimeout)
	defer cancel()
	if err := s.replicas.RemoveReplica(c, id); err != nil {
		return err
	}
	if _, err := s.submit(ctx, statemachine.Command{Kind: statemachine.CmdSetManager, Seq: id}); err != nil {
		return err
	}
	s.cfg.Logf("api: replica %d removed from every group", id)
	return s.listReplicas(ctx, nil)
}
