package api

import (
	"fmt"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"shoal/api/client"
	routing "shoal/route"
	"shoal/statemachine"
	"shoal/wire"
)

// Self says which replica this is, whether it leads the cluster group
// (and so runs the leader duties), and since when it knows the cluster
// group's leader. The engine implements it.
type Self interface {
	ReplicaID() uint64
	Leading() bool
	ClusterLeader() (leader uint64, since time.Time)
}

func (s *Server) getStatus(ctx *fasthttp.RequestCtx, _ []string) error {
	if err := s.waitFor(ctx); err != nil {
		return err
	}
	doc := client.Status{Replica: s.self.ReplicaID(), Leading: s.self.Leading()}
	if leader, since := s.self.ClusterLeader(); leader != 0 {
		doc.Leader, doc.LeaderSince = leader, since.UTC().Format(time.RFC3339Nano)
	}
	hash := ctx.QueryArgs().GetBool("hash")
	all := append([]int{routing.ClusterGroup}, s.serviceGroups()...)
	cur, err := s.read(all, func(g int, st *statemachine.State) {
		gs := client.GroupStatus{Group: g, AppliedIndex: st.LastIndex()}
		if hash {
			gs.Hash = fmt.Sprintf("%016x", st.Hash())
		}
		gs.Leader, _ = s.leaders.Leader(g)
		if g == routing.ClusterGroup {
			doc.Nodes = len(st.NodeIDs())
			doc.Settings = renderSettings(st.Settings())
			for id, addr := range st.Managers() {
				doc.Managers = append(doc.Managers, client.Manager{Replica: id, API: addr})
			}
		} else {
			gs.Services, gs.Tasks = len(st.ServiceIDs()), st.NumTasks()
			doc.Services += gs.Services
			doc.Tasks += gs.Tasks
		}
		doc.Groups = append(doc.Groups, gs)
	})
	if err != nil {
		return err
	}
	if s.cfg.Monitor != nil {
		grace, orphan := s.cfg.Monitor.Timers()
		doc.Monitor = client.MonitorTimers{FailoverGrace: client.Duration(grace), OrphanTimeout: client.Duration(orphan)}
	}
	slices.SortFunc(doc.Managers, func(a, b client.Manager) int { return int(a.Replica) - int(b.Replica) })
	doc.Index = wire.Cursor(cur).Token()
	return s.reply(ctx, fasthttp.StatusOK, cur, doc)
}
