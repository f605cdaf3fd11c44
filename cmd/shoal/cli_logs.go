package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"shoal/api/client"
)

func newServiceLogsCmd(o *cliOptions) *cobra.Command {
	var follow, timestamps, noTaskIDs bool
	var tail string
	var since time.Duration
	cmd := &cobra.Command{
		Use:   "logs NAME|TASK-ID",
		Short: "Show the output of a service's tasks, or of one task",
		Long: `Show the output of a service's tasks (or of one task), merged from every node that ran them,
each line prefixed with its task's name, ID and node (docs/logs.md).

Lines come from the files each agent keeps (size-capped: the newest part of each task's output).
Notes from the managers and agents (a node that is down, lines dropped because this reader
did not keep up) go to standard error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := client.LogOptions{Follow: follow, Tail: -1, Since: since}
			if tail != "all" {
				n, err := strconv.Atoi(tail)
				if err != nil || n < 0 {
					return fmt.Errorf("--tail %q: give a number of lines, or all", tail)
				}
				opts.Tail = n
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			target, isTask := args[0], isTaskID(args[0])
			p := &logPrinter{out: cmd.OutOrStdout(), errs: cmd.ErrOrStderr(), timestamps: timestamps, noTaskIDs: noTaskIDs}
			err = c.Logs(cmd.Context(), target, isTask, opts, p.print)
			if cmd.Context().Err() != nil {
				return nil // interrupted
			}
			return userError(err)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "keep printing new lines until interrupted")
	f.StringVarP(&tail, "tail", "n", "all", "print only the last N lines of each task's stdout and stderr")
	f.DurationVar(&since, "since", 0, "print only lines read at most this long ago (e.g. 10m; see docs/logs.md)")
	f.BoolVarP(&timestamps, "timestamps", "t", false, "print each line's time")
	f.BoolVar(&noTaskIDs, "no-task-ids", false, "leave task IDs out of the prefix")
	return cmd
}

// isTaskID says whether arg names a task (its ID, a number whose top 16
// bits are a group) rather than a service.
func isTaskID(arg string) bool {
	id, err := strconv.ParseUint(arg, 10, 64)
	return err == nil && id>>48 != 0
}

// logPrinter prints a log stream as `docker service logs` does: NAME.ID@NODE
// padded to the widest prefix so far, then "| " and the line.
type logPrinter struct {
	out, errs  io.Writer
	timestamps bool
	noTaskIDs  bool
	width      int
}

func (p *logPrinter) print(l client.LogLine) error {
	if l.Stream == "note" {
		who := l.Name
		if who == "" {
			who = l.NodeName
		}
		if who != "" {
			who += ": "
		}
		_, err := fmt.Fprintf(p.errs, "note: %s%s\n", who, l.Line)
		return err
	}
	node := l.NodeName
	if node == "" {
		node = strconv.FormatUint(uint64(l.Node), 10)
	}
	prefix := l.Name
	if !p.noTaskIDs {
		prefix += "." + l.Task
	}
	prefix += "@" + node
	p.width = max(p.width, len(prefix))
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteString(strings.Repeat(" ", p.width-len(prefix)))
	b.WriteString(" | ")
	if p.timestamps {
		b.WriteString(l.At.UTC().Format(time.RFC3339Nano))
		b.WriteByte(' ')
	}
	b.WriteString(l.Line)
	b.WriteByte('\n')
	_, err := io.WriteString(p.out, b.String())
	return err
}
