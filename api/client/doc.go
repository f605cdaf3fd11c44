// Package client is the Go client of Shoal's manager API: the JSON documents
// of the user API (/v1/...), a user client with blocking reads and the event
// stream, and the agent client that speaks wire/ frames to the agent
// endpoints.
//
// The one idea: everything outside the manager process — the CLI, agents,
// the load generator — talks to a manager through this package, so they see
// the cluster exactly as a user does.
//
// Contract:
//
//   - It imports only wire/, statemachine's vocabulary types, fasthttp and
//     the standard library: never the engine.
//   - Every error a manager answers with is an *APIError (user API) or a
//     *wire.Error (agent API) carrying the manager's code and message;
//     anything else is a transport error.
//   - A manager address is host:port or http://host:port.
package client
