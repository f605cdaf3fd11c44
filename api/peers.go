package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"shoal/api/client"
	routing "shoal/route"
	"shoal/security"
	"shoal/statemachine"
)

// pushTokens hands rotated secrets to every other manager recorded in the
// cluster group, and returns the ones it could not reach (they keep
// accepting the old token for new joins until a later rotation reaches
// them).
func (s *Server) pushTokens(secrets security.Secrets) []string {
	var peers []string
	_ = s.reads.ReadLocal(routing.ClusterGroup, func(st *statemachine.State) {
		for id, addr := range st.Managers() {
			if id != s.self.ReplicaID() {
				peers = append(peers, addr)
			}
		}
	})
	slices.Sort(peers)
	if len(peers) == 0 {
		return nil
	}
	if s.cfg.Security.PeerTLS == nil {
		return peers
	}
	body, _ := json.Marshal(client.PeerTokens{WorkerSecret: secrets.Worker.Text(), ManagerSecret: secrets.Manager.Text()})
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: s.cfg.Security.PeerTLS}, Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	var mu sync.Mutex
	var failed []string
	var wg sync.WaitGroup
	for _, addr := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := postPeer(hc, addr, body); err != nil {
				s.cfg.Logf("api: the rotated token did not reach the manager at %s: %v", addr, err)
				mu.Lock()
				failed = append(failed, addr)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(failed)
	return failed
}

func postPeer(hc *http.Client, addr string, body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", "https://"+addr+"/v1/tokens/peer", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}
