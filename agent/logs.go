package agent

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	sm "shoal/statemachine"
)

// Task output: each task's stdout and stderr go straight to files under
// <data dir>/logs/<task ID>/ (the process writes them itself, so it keeps
// running when the agent does not). The executor caps them by copy and
// truncate: a file past the limit is copied to <name>.1 and emptied; the
// process appends on (the files are opened O_APPEND).

func logDir(dataDir string, id sm.TaskID) string {
	return filepath.Join(dataDir, "logs", strconv.FormatUint(uint64(id), 10))
}

// OutputDir says where the task's output is kept (OutputKeeper).
func (e *ProcessExecutor) OutputDir(task sm.TaskID) string { return logDir(e.dir, task) }

// openLogs opens (creating) the task's stdout and stderr files for appending.
func openLogs(dir string) (stdout, stderr *os.File, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("agent: make the log directory: %w", err)
	}
	open := func(name string) (*os.File, error) {
		return os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	}
	if stdout, err = open("stdout"); err != nil {
		return nil, nil, err
	}
	if stderr, err = open("stderr"); err != nil {
		stdout.Close()
		return nil, nil, err
	}
	return stdout, stderr, nil
}

// capLogs rotates the task's log files that grew past limit bytes.
func capLogs(dir string, limit int64) error {
	for _, name := range []string{"stdout", "stderr"} {
		if err := capFile(filepath.Join(dir, name), limit); err != nil {
			return err
		}
	}
	return nil
}

func capFile(path string, limit int64) error {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() <= limit {
		return nil // gone or small
	}
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(path + ".1")
	if err != nil {
		return err
	}
	// Keep the newest limit bytes of what was written.
	if _, err := src.Seek(max(0, fi.Size()-limit), io.SeekStart); err != nil {
		dst.Close()
		return err
	}
	_, err = io.Copy(dst, io.LimitReader(src, limit))
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Truncate(path, 0)
}
