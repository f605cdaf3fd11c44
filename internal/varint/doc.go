// Package varint is Shoal's one bounded decoder for its compact binary
// encodings (statemachine commands and snapshots, ipam pools, the wire
// protocol's payloads, the agent's stored records): unsigned and zig-zag
// varints, bytes, length-prefixed strings and elements, and collection
// counts read from a byte slice.
//
// The one idea: decoding untrusted bytes never panics and never allocates
// more than the input can justify. A Reader keeps the first problem as a
// sticky error wrapping the caller's sentinel (statemachine.ErrCorrupt,
// ipam.ErrCorrupt, ...) and from then on every read returns zero values, so
// a decoder reads straight through and checks Err once. Counts and lengths
// are bounded by the bytes left, so a corrupt length cannot force a huge
// allocation. Encoding is encoding/binary's AppendUvarint/AppendVarint
// (UvarintLen sizes it).
package varint
