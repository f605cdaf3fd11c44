package main

import (
	"errors"
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
			target, isTask, err := logsTarget(cmd, c, args[0])
			if err != nil {
				return err
			}
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

// logsTarget says what `service logs ARG` shows: the service named arg,
// or else the one task whose ID begins with arg (its decimal ID returned).
func logsTarget(cmd *cobra.Command, c *client.Client, arg string) (target string, isTask bool, err error) {
	if arg == "" {
		return "", false, errors.New("an empty name: give a service name or a task ID as `service ps` prints it")
	}
	ctx, cancel := requestCtx(cmd)
	defer cancel()
	_, _, err = c.Service(ctx, arg, nil)
	var ae *client.APIError
	if err == nil || !errors.As(err, &ae) || ae.Code != client.CodeNotFound {
		return arg, false, userError(err)
	}
	t, terr := resolveTask(ctx, c, arg)
	if errors.Is(terr, errNoSuchTask) {
		return "", false, fmt.Errorf("no service is named %q and no task ID begins with it (see `shoal service ls`)", arg)
	}
	if terr != nil {
		return "", false, terr
	}
	return t.ID, true, nil
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
		prefix += "." + printedTaskID(l.Task, false)
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
