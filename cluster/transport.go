package cluster

import "context"

// Transport carries calls between the brokers of a cluster: a broker that
// does not lead a shard sends the shard's calls to the broker that does.
// TCP is the default; an embedding program may carry them over its own
// RPC instead (clustertest.RunTransport checks an implementation).
type Transport interface {
	// Listen serves the calls other brokers send to addr (host:port; port
	// 0 picks a free one) with h, until the Server is closed.
	Listen(addr string, h Handler) (Server, error)
	// Call sends one call to the broker at addr and returns once it is
	// sent: calls to one address made one after another from one
	// goroutine reach that broker's Handler in that order. wait returns
	// the bytes the Handler's answer gave, or an error if none came back
	// (the broker is not there, the connection was lost, ctx ended); the
	// call may or may not have been served then. ctx's deadline goes with
	// the call: the serving broker's ctx ends then too.
	Call(ctx context.Context, addr string, shard int, method string, body []byte) (wait func() ([]byte, error))
	// Close closes every connection Call opened; calls waiting fail.
	Close() error
}

// Handler serves one call: it returns once the call is queued behind the
// calls of its connection that came before it, and answer (which a
// transport may call on another goroutine, concurrently with later calls)
// returns the bytes to send back.
type Handler func(ctx context.Context, shard int, method string, body []byte) (answer func() []byte)

// Server is a Transport's listener.
type Server interface {
	// Addr is the address it listens on (with the port picked, if 0).
	Addr() string
	// Close stops listening, closes the connections, and waits for the
	// calls being served to return.
	Close() error
}
