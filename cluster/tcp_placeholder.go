package cluster

import (
	"context"
	"errors"
)

// TCP is replaced by the transport branch.
type TCP struct{}

func (*TCP) Listen(string, Handler) (Server, error) {
	return nil, errors.New("cluster: TCP not built yet")
}
func (*TCP) Call(context.Context, string, int, string, []byte) func() ([]byte, error) {
	return func() ([]byte, error) { return nil, errors.New("no TCP") }
}
func (*TCP) Close() error { return nil }
