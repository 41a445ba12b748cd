package memcluster

import "errors"

// ErrInjected is the error of the operations FailNext fails, when it is
// given none.
var ErrInjected = errors.New("memcluster: injected failure")

// Errors of the lease operations, as the Node tells them apart.
var (
	// errLeaseNotFound: the lease ended (it expired or was revoked).
	errLeaseNotFound = errors.New("memcluster: lease not found")
	// errNoAnswer: a renewal was lost (PauseLease).
	errNoAnswer = errors.New("memcluster: no answer")
)
