package cluster

import "errors"

// Sentinel errors, matched with errors.Is.
var (
	// ErrClosed: the Transport, Server or Node is closed.
	ErrClosed = errors.New("cluster: closed")
	// ErrConnectionLost: the connection a call was sent on closed before
	// its answer came back. The call may or may not have been served; it
	// is retriable (the next Call dials again). The error that closed the
	// connection is wrapped beside it.
	ErrConnectionLost = errors.New("cluster: connection lost")
	// ErrFrameTooLarge: a frame's length is above the receiver's
	// MaxFrameBytes, or a call or answer would make one above the
	// sender's.
	ErrFrameTooLarge = errors.New("cluster: frame too large")
	// ErrBadFrame: a frame is too short for its header, or its method
	// length points past its end.
	ErrBadFrame = errors.New("cluster: malformed frame")
	// ErrTruncated: the stream ended inside a frame.
	ErrTruncated = errors.New("cluster: frame truncated")
	// ErrPeerIdentity: a peer's certificate names no node, or more than
	// one (NodeID), or a call reached a broker whose certificate names
	// another node than the one the call was for (WithCallee). The call
	// was not sent.
	ErrPeerIdentity = errors.New("cluster: peer identity refused")
)
