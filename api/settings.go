package api

import (
	"github.com/valyala/fasthttp"

	"shoal/api/client"
	routing "shoal/route"
	"shoal/statemachine"
	"shoal/wire"
)

// The cluster settings are replicated state (statemachine.ClusterSettings):
// a change goes through the cluster group, whose outbox carries it to
// every service group before the answer.

func renderSettings(cs statemachine.ClusterSettings) client.ClusterSettings {
	return client.ClusterSettings{TaskHistoryLimit: cs.TaskHistoryLimit}
}

// clusterSettings reads the settings the cluster group holds.
func (s *Server) clusterSettings() (client.ClusterSettings, wire.Cursor, error) {
	var doc client.ClusterSettings
	cur, err := s.read([]int{routing.ClusterGroup}, func(_ int, st *statemachine.State) {
		doc = renderSettings(st.Settings())
	})
	return doc, cur, err
}

func (s *Server) getSettings(ctx *fasthttp.RequestCtx, _ []string) error {
	if err := s.waitFor(ctx); err != nil {
		return err
	}
	doc, cur, err := s.clusterSettings()
	if err != nil {
		return err
	}
	return s.reply(ctx, fasthttp.StatusOK, cur, doc)
}

func (s *Server) updateSettings(ctx *fasthttp.RequestCtx, _ []string) error {
	var u client.ClusterSettingsUpdate
	if err := decodeJSON(ctx, &u); err != nil {
		return err
	}
	if u.TaskHistoryLimit == nil {
		return invalidSpec("task_history_limit", "nothing to change: give task_history_limit")
	}
	if l := *u.TaskHistoryLimit; l < 1 || l > statemachine.MaxTaskHistoryLimit {
		return invalidSpec("task_history_limit", "task_history_limit %d is out of range: give 1 to %d tasks per slot (the running one counts)",
			l, statemachine.MaxTaskHistoryLimit)
	}
	cmd := statemachine.Command{Kind: statemachine.CmdSetClusterSettings,
		Settings: &statemachine.ClusterSettings{TaskHistoryLimit: *u.TaskHistoryLimit}}
	if _, err := s.submit(ctx, cmd); err != nil {
		return err
	}
	doc, cur, err := s.clusterSettings()
	if err != nil {
		return err
	}
	return s.reply(ctx, fasthttp.StatusOK, cur, doc)
}
