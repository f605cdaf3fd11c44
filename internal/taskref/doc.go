// Package taskref is how a task ID is written for people, and how what a
// person typed is matched back to a task.
//
// A task ID is its group in the top 16 bits and a per-group counter below,
// so every task of a service shares its leading decimal digits. The printed
// form is the ID passed through mix.Mix64 (a bijection on uint64) and
// written in base 32 (digits and lower-case letters without i, l, o, u),
// most significant bits first: 13 characters for all 64 bits (Format), of
// which the first 12 are the short form a table shows (Short). The bits
// that differ between two tasks of one service are spread over every
// character, so a few leading characters usually tell tasks apart.
//
// A Prefix is what a user typed: any leading part of the printed form, or
// the whole decimal ID the API answers with. It matches exactly the tasks
// whose printed form begins with it; callers decide what zero or several
// matches mean. Pure: no clock, no I/O.
package taskref
