// Package fleet runs the loadgen's simulated agents: many real agents
// (agent.Run: session, heartbeats, assignments long-poll, status batching,
// sync) in one process, each with a simulated executor, an in-memory store
// and its own hostname, all sharing one fasthttp client to the managers
// over loopback HTTP.
//
// The one idea: the load is made by the real agent code, so what the
// managers see is what real nodes would send; only the processes are
// simulated. Around each agent the fleet puts two thin wrappers that feed
// an Observer (the invariant checker): the manager client reports every
// task an agent is handed, and the executor reports which addresses each
// agent holds, from prepare until the agent forgets the task.
//
// Faults: Partition cuts an agent off the managers for a while (its calls
// fail, its long-poll is cut, its tasks keep running); Vanish stops an
// agent like kill -9 (its simulated processes keep running) and Return
// starts it again over the same store with the executor Reopen()ed; Crash
// makes running task processes exit with code 137.
//
// The loadgen runs the fleet in a child process of its own (Serve, in
// `shoal loadgen-fleet`; Remote, in the loadgen): the agents then share the
// CPUs with the loadgen's event-stream reader and checks through the
// operating system's scheduler, not Go's, which is fair among goroutines
// and left that one reader a sliver next to a thousand agents. The child
// is driven over net/rpc and streams its observations back in order.
//
// Fleet workers on other hosts (net.go; `shoal loadgen fleet`) speak the
// same protocol over two TLS connections to the loadgen, which listens
// with a certificate of its own that the run's token pins (Listen, Dial):
// a worker of another run, or with a wrong token, is refused with a line
// saying which. The loadgen measures each worker's clock offset over the
// connection and subtracts it from the worker's stamps before the merge
// (multi.go), so the order across hosts holds within the measured error
// bound. A worker that dies, drops its connection or leaves a call
// unanswered is lost: its agents are gone, and the observer learns that
// their nodes' processes died (GoneObserver) after the last thing they
// observed.
package fleet
