package wal

import "time"

// Clock is the time source of a Buffer. The zero Options use the system
// clock; tests pass a fake one to drive Linger without sleeping.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d, unless stopped.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call: Stop prevents the call if it has not
// started, and reports whether it did. It is an alias, so that a clock
// written for another package (or a fake one) satisfies Clock as long as
// its AfterFunc returns interface{ Stop() bool }.
type Timer = interface{ Stop() bool }

// systemClock is the Clock of the time package.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

var _ Clock = systemClock{}
