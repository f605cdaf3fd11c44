package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"shoal/api/client"
	"shoal/internal/taskref"
)

// Task and node IDs as people read and type them. A task prints as
// taskref.Short of its decimal ID (taskref.Format with --no-trunc); any
// unique prefix of that form, or the decimal ID, finds it back. Node IDs
// are small numbers already; a node is also found by its hostname or a
// unique prefix of either.

// printedTaskID is the ID a table shows for a task whose API "id" is id.
func printedTaskID(id string, noTrunc bool) string {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return id
	}
	if noTrunc {
		return taskref.Format(n)
	}
	return taskref.Short(n)
}

// errNoSuchTask is resolveTask's answer when nothing matches what the user
// typed (the caller may then try another kind of object).
var errNoSuchTask = errors.New("no such task")

// resolveTask finds the one task whose ID begins with what the user typed
// (ref: any leading part of the printed ID, either case, or the decimal
// ID). The manager matches the prefix among the tasks it knows
// (GET /v1/tasks?id_prefix=); none or several matches are refused with the
// text the user typed. The error of a missing task wraps errNoSuchTask.
func resolveTask(ctx context.Context, c *client.Client, ref string) (client.Task, error) {
	if _, err := taskref.ParsePrefix(ref); err != nil {
		return client.Task{}, fmt.Errorf("%w: %v", errNoSuchTask, err)
	}
	l, _, err := c.Tasks(ctx, &client.Query{Params: url.Values{"id_prefix": {ref}, "per_page": {"4"}}})
	if err != nil {
		return client.Task{}, userError(err)
	}
	switch len(l.Items) {
	case 0:
		return client.Task{}, fmt.Errorf("%w: no task ID begins with %q", errNoSuchTask, ref)
	case 1:
		return l.Items[0], nil
	}
	var some []string
	for _, t := range l.Items {
		some = append(some, fmt.Sprintf("%s (%s.%d)", printedTaskID(t.ID, true), t.Service, t.Slot))
	}
	more := ""
	if l.NextToken != "" {
		more = ", ..."
	}
	return client.Task{}, fmt.Errorf("task ID %q is ambiguous: it begins %s%s; type more of it", ref, strings.Join(some, ", "), more)
}

// resolveNode finds the one node the user named: by its whole ID or
// hostname, else by a prefix of either that only one node has.
func resolveNode(ctx context.Context, c *client.Client, ref string) (client.Node, error) {
	if ref == "" {
		return client.Node{}, errors.New("an empty node name: give a node ID or hostname as `node ls` shows it")
	}
	l, _, err := c.Nodes(ctx, nil)
	if err != nil {
		return client.Node{}, userError(err)
	}
	id := nodeID
	for _, exact := range []func(client.Node) bool{
		func(n client.Node) bool { return id(n) == ref },
		func(n client.Node) bool { return n.Name == ref },
	} {
		for _, n := range l.Items {
			if exact(n) {
				return n, nil
			}
		}
	}
	var found []client.Node
	for _, n := range l.Items {
		if strings.HasPrefix(id(n), ref) || strings.HasPrefix(n.Name, ref) {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 0:
		return client.Node{}, fmt.Errorf("node %q does not exist: no node ID or hostname begins with it (see `shoal node ls`)", ref)
	case 1:
		return found[0], nil
	}
	sort.Slice(found, func(i, j int) bool { return found[i].ID < found[j].ID })
	var some []string
	for _, n := range found[:min(len(found), 4)] {
		some = append(some, fmt.Sprintf("%s (%s)", id(n), n.Name))
	}
	if len(found) > 4 {
		some = append(some, "...")
	}
	return client.Node{}, fmt.Errorf("node %q is ambiguous: it begins %s; give the whole ID or hostname", ref, strings.Join(some, ", "))
}

// nodeID is the node's ID as the API's paths take it.
func nodeID(n client.Node) string { return strconv.FormatUint(uint64(n.ID), 10) }

// nodeErr names the node in a manager's refusal the way the user typed it
// (the manager names it by ID): `node "web-3": node 5 is ready; ...`.
func nodeErr(typed, id string, err error) error {
	err = userError(err)
	if err == nil || typed == id {
		return err
	}
	return fmt.Errorf("node %q: %w", typed, err)
}
