package loadgen

import (
	"fmt"
	"path/filepath"
	"time"
)

// failoverProfileSeconds is how long the surviving replicas are profiled
// after a leader kill: the election and the whole fleet's move to the new
// leader.
const failoverProfileSeconds = 15

// profileFailover fetches, with --pprof-dir, a CPU profile of every
// replica but the killed one over the seconds after leader kill number
// kill (mN.killK.cpu.prof): where a failover's time goes, which the
// ramp's profiles do not show.
func (r *run) profileFailover(kill int, dead uint64) {
	if r.cfg.PprofDir == "" {
		return
	}
	for _, rep := range r.cl.Replicas {
		if rep.ID == dead {
			continue
		}
		file := filepath.Join(r.cfg.PprofDir, fmt.Sprintf("m%d.kill%d.cpu.prof", rep.ID, kill))
		profileWG.Add(1)
		go func() {
			defer profileWG.Done()
			// A replica profiles one thing at a time: while the ramp's
			// profile still runs, ask again each second for what is left
			// of the window.
			end := time.Now().Add(failoverProfileSeconds * time.Second)
			var err error
			for {
				secs := int(time.Until(end).Round(time.Second) / time.Second)
				if secs < 5 {
					r.logf("pprof after leader kill %d: no profile of replica %d: %v", kill, rep.ID, err)
					return
				}
				err = r.cl.Access.FetchProfile(r.ctx, rep.API, fmt.Sprintf("profile?seconds=%d", secs), file)
				if r.ctx.Err() != nil {
					return
				}
				if err == nil {
					r.profMu.Lock()
					r.profiles = append(r.profiles, file)
					r.profMu.Unlock()
					return
				}
				select {
				case <-time.After(time.Second):
				case <-r.ctx.Done():
					return
				}
			}
		}()
	}
}
