package kafkaserver

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/internal/kafkatest"
)

// metadataBrokers returns the brokers Metadata names, as HOST:PORT by
// node ID.
func metadataBrokers(t *testing.T, addr string) map[int32]string {
	t.Helper()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(t.Context(), kafkatest.Client(t, addr))
	require.NoError(t, err)
	out := map[int32]string{}
	for _, b := range resp.Brokers {
		out[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	return out
}

// TestNew: a nil Config serves with the defaults and advertises the
// listener's address; Addr is nil until Serve; Serve is for one
// listener; Advertise and NodeID are what Metadata names.
func TestNew(t *testing.T) {
	b, err := diskless.Open(t.Context(), &diskless.Config{BrokerID: 7, Rack: "az-a"})
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()

	_, err = New(t.Context(), b, nil)
	require.ErrorContains(t, err, "not the Broker's", "NodeID 0 on Broker 7")
	s, err := New(t.Context(), b, &Config{NodeID: 7, Rack: "az-a"})
	require.NoError(t, err)
	require.Nil(t, s.Addr())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	addr := ln.Addr().String()
	require.Equal(t, map[int32]string{7: addr}, metadataBrokers(t, addr))
	require.Equal(t, ln.Addr(), s.Addr())
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln2.Close()
	require.ErrorContains(t, s.Serve(ln2), "twice")
	require.NoError(t, s.Close())
	require.NoError(t, <-served)
	require.NoError(t, s.Close(), "twice")

	// Advertised elsewhere (a proxy's address, say).
	s, err = New(t.Context(), b, &Config{NodeID: 7, Rack: "az-a", Advertise: "kafka.example:19092"})
	require.NoError(t, err)
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { served <- s.Serve(ln) }()
	require.Equal(t, map[int32]string{7: "kafka.example:19092"}, metadataBrokers(t, ln.Addr().String()))
	require.NoError(t, s.Close())
	require.NoError(t, <-served)

	// Closed before it serves: Serve returns at once.
	s, err = New(t.Context(), b, &Config{NodeID: 7, Rack: "az-a"})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	require.NoError(t, s.Serve(ln))
}

// TestNewErrors: New names the Config field that is wrong.
func TestNewErrors(t *testing.T) {
	b, err := diskless.Open(t.Context(), nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	for _, c := range []struct {
		cfg Config
		err string
	}{
		{Config{DefaultPartitions: -1}, "DefaultPartitions"},
		{Config{NodeID: -1}, "NodeID"},
		{Config{Rack: "az-b"}, "Rack"},
		{Config{IdleTimeout: -1}, "IdleTimeout"},
		{Config{QueuedMaxRequestBytes: -1}, "QueuedMaxRequestBytes"},
		{Config{Advertise: "nohost"}, "Advertise"},
		{Config{Advertise: "0.0.0.0:9092", Clustered: true}, "give an address they can reach"},
	} {
		_, err := New(t.Context(), b, &c.cfg)
		require.ErrorContains(t, err, c.err, "%+v", c.cfg)
	}
	_, err = New(t.Context(), nil, nil)
	require.Error(t, err)
}
