// Package wire is the agent↔manager protocol: the messages an agent and a
// manager exchange, their binary frames and JSON form, and the cursor token
// that names a point in the cluster's history.
//
// The contract:
//
//   - A frame is "SHW", a version byte, a type byte, a flags byte, the body
//     length as a uvarint and the body. Payloads are at most MaxFrame (1 MiB)
//     before compression; above CompressThreshold (4 KiB) they are zstd
//     compressed when that helps. Append refuses what it could not decode.
//   - Decoders are total: on any input Decode, DecodeInto, DecodeJSON and
//     ParseCursor return a message or an error wrapping ErrMalformed,
//     ErrTooLarge, ErrVersion, ErrType or ErrBadCursor; they never panic and
//     allocate at most a small multiple of the input or MaxFrame.
//   - A newer sender may add fields at the end of any message or nested
//     struct; an older reader skips them, and a newer reader gives fields an
//     older sender did not write their zero value. New enum values need a new
//     Version.
//   - A COMPLETE larger than one frame is sent as the chunks of
//     SplitComplete (back to back in one body, split again by Next); the
//     agent applies it once the chunk with Last arrives.
//   - The package is pure: no I/O, no clock, no goroutines. Its zstd coder
//     pair runs on the caller's goroutine (EncodeAll/DecodeAll with
//     concurrency 1), so concurrent callers compress one at a time.
//
// README.md shows the JSON form of every message.
package wire
