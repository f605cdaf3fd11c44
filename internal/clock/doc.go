// Package clock is the one source of time for code that waits: a Clock
// interface, the Real clock that production code uses, and a Fake that tests
// advance by hand.
//
// Contract: code that sleeps, times out or schedules holds a Clock and never
// calls time.Now, time.After or time.NewTimer itself. A test drives a Fake:
// it waits until the code under test is blocked on the clock (BlockUntil,
// with a real-time deadline, never a sleep) and then moves time forward
// (Advance); timers whose deadline passes fire in deadline order.
package clock
