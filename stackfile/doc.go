// Package stackfile reads a stack file — the subset of a compose file
// Shoal can honour — into the API documents of the stack's services and
// networks.
//
// Contract:
//   - Parse takes the file's bytes and the stack's name and returns a
//     Stack whose services are named STACK_SERVICE, carry the label
//     StackLabel=STACK, and name their networks STACK_NETWORK; its
//     networks are named STACK_NETWORK with the subnet of their
//     ipam.config[0].subnet.
//   - Every key outside the subset (docs/stacks.md lists it) is refused
//     with its line number and its path in the file
//     ("line 12: services.web.ports: not supported ..."), as is a value of
//     the wrong kind (a string where a list is wanted, a size or duration
//     that does not parse, a network a service names but the file does
//     not declare). Nothing is silently ignored except the top-level
//     "version", which compose itself treats as informative.
//   - A string command is refused: a command is a list, one argv entry per
//     item, and no shell quoting is guessed.
//   - Parse is pure: no I/O, no clock; the same bytes give the same Stack
//     (services and networks in name order, environment maps in key
//     order).
package stackfile
