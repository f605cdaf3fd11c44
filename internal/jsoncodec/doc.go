// Package jsoncodec is the API's one JSON codec for what it writes and reads
// in volume: response bodies, event-stream lines, and the client's decoding
// of both. It uses github.com/goccy/go-json, which writes the same bytes as
// encoding/json for the API's types (the package's tests compare them) about
// four times faster and reads them about five times faster: a million-task
// cluster's event stream and task listings were mostly spent in
// encoding/json on both sides.
//
// Request bodies a user wrote keep encoding/json's strict decoder in the
// server (unknown fields rejected, its error messages): speed does not
// matter there, exactness does.
package jsoncodec
