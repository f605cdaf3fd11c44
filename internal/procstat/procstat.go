// Package procstat reads a process's status line, /proc/PID/stat on Linux:
// the one parser of it for the agent's process executor and the load
// generator's CPU readings.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ClockTicks is Linux's USER_HZ, the unit of the line's CPU times (100 on
// every architecture Go supports).
const ClockTicks = 100

// Stat is the part of /proc/PID/stat Shoal uses.
type Stat struct {
	State     byte   // field 3: R, S, D, Z, ...
	Pgrp      int32  // field 5: the process group
	UTime     uint64 // field 14: user CPU, clock ticks
	STime     uint64 // field 15: system CPU, clock ticks
	StartTime uint64 // field 22: clock ticks after boot
}

// CPUSeconds is the CPU time (user and system) the process has used.
func (s Stat) CPUSeconds() float64 { return float64(s.UTime+s.STime) / ClockTicks }

// Read reads the stat line of process pid under root (normally "/proc").
func Read(root string, pid int) (Stat, error) {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return Stat{}, err
	}
	return Parse(b)
}

// Parse parses a /proc/PID/stat line. The command name (field 2) is in
// parentheses and may hold spaces and parentheses, so fields are counted
// after its last ')'.
func Parse(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, errors.New("/proc stat line without a command name")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 20 {                     // fields 3..22
		return Stat{}, fmt.Errorf("/proc stat line with %d fields after the name", len(f))
	}
	pgrp, err1 := strconv.ParseInt(f[2], 10, 32)
	ut, err2 := strconv.ParseUint(f[11], 10, 64)
	st, err3 := strconv.ParseUint(f[12], 10, 64)
	start, err4 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || len(f[0]) != 1 {
		return Stat{}, errors.New("malformed /proc stat line")
	}
	return Stat{State: f[0][0], Pgrp: int32(pgrp), UTime: ut, STime: st, StartTime: start}, nil
}
