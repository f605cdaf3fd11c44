// Package meminfo reads the machine's memory size from /proc/meminfo: the
// one parser of it for the agent's node description, serve's memory limit
// and the load generator's machine facts.
package meminfo

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Total is the machine's memory in bytes (the MemTotal line of
// root/proc/meminfo; root is "/" outside tests).
func Total(root string) (int64, error) {
	f, err := os.Open(filepath.Join(root, "proc", "meminfo"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return Parse(f)
}

// Parse reads the MemTotal line of a meminfo file, whose figure is in KiB.
func Parse(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "MemTotal:" {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil || kb < 0 {
			return 0, fmt.Errorf("MemTotal %q is not a number of KiB", fields[1])
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no MemTotal line")
}
