package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// An agent told to stop (SIGTERM from a service manager, Ctrl-C in a
// terminal) stops cleanly: exit status 0 and no error line, so a
// supervisor does not record the stop as a failure.
func TestAgentStopsCleanlyOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			api, _, _ := oneManager(t, 0)
			a := startProc(t, "agent", "agent", "--insecure", "--join", api,
				"--data-dir", filepath.Join(t.TempDir(), "a"), "--hostname", "stopper")
			waitFor(t, 30*time.Second, "the agent's node ready", func() (bool, string) {
				out, _ := cliErr(t, api, "node", "ls")
				return strings.Contains(out, "Ready"), out
			})
			if err := a.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-a.exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("the agent did not stop on %v:\n%s", sig, a.out.String())
			}
			if code := a.cmd.ProcessState.ExitCode(); code != 0 || strings.Contains(a.out.String(), "shoal: ") {
				t.Fatalf("the agent stopped on %v with exit status %d:\n%s", sig, code, a.out.String())
			}
		})
	}
}
