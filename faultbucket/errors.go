package faultbucket

import (
	"errors"
	"fmt"

	"gocloud.dev/gcerrors"
)

// ErrInjected is wrapped by every error the wrapper injects: a failure
// drawn from an operation's ErrorRate, an outage, or a Hook's error that
// does not already carry a code.
var ErrInjected = errors.New("faultbucket: injected failure")

// Error is an injected failure. Through the *blob.Bucket it surfaces
// wrapped by gocloud's error type: gcerrors.Code(err) returns Code,
// errors.Is(err, ErrInjected) holds, and errors.As finds the *Error.
type Error struct {
	// Op and Key are the call that failed.
	Op  Op
	Key string
	// Code is the gocloud error code the bucket reports for it.
	Code gcerrors.ErrorCode
	// Outage is true when the call failed because of an outage.
	Outage bool
	// AfterEffect, set by a Hook, fails the call after it took effect: a
	// PUT that reached the store but whose answer was lost. (A GET fails
	// whole either way.)
	AfterEffect bool
}

func (e *Error) Error() string {
	what := "injected failure"
	if e.Outage {
		what = "injected outage"
	}
	return fmt.Sprintf("faultbucket: %s of %s %q (code %v)", what, e.Op, e.Key, e.Code)
}

// Unwrap makes errors.Is(err, ErrInjected) hold.
func (e *Error) Unwrap() error { return ErrInjected }
