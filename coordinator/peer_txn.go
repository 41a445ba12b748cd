package coordinator

import (
	"context"

	"github.com/diskless-go/diskless/coordinator/state"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/wal/walmeta"
)

// Versions of the txn and transactions calls. Version 2 of each carries
// the fields of transactions v2 (TxnRequest.V2; Transaction.V2,
// PrevProducerID and NextProducerID); version 1 is the form before them,
// kept as it was (txnRequestV1, transactionV1) for brokers of the
// releases before. A call of transactions v2 (TxnRequest.V2) is never
// sent in version 1, which would drop the field: a leader that speaks
// only version 1 refuses it (UNSUPPORTED_VERSION) before anything is
// written. A cluster reaches that only by a misconfiguration: requests of
// transactions v2 are refused until the transaction.version feature is 2,
// which needs every live broker's release to support it.

// txnRequestV1 is TxnRequest as version 1 of the txn call carries it.
type txnRequestV1 struct {
	Op         TxnOp
	ID         string
	ProducerID int64
	Epoch      int16
	TimeoutMs  int32
	Partitions []walmeta.TopicPartition
	Group      string
	Offsets    []GroupOffset
	Commit     bool
	Shards     int
}

// transactionV1 is Transaction as version 1 of the txn and transactions
// calls carry it.
type transactionV1 struct {
	ID                    string
	ProducerID            int64
	Epoch                 int16
	State                 TxnState
	TimeoutMs             int32
	StartTime, UpdateTime int64
	Partitions            []walmeta.TopicPartition
	Groups                []string
	Offsets               []state.TxnOffset
}

func txnRequestFromV1(r txnRequestV1) TxnRequest {
	return TxnRequest{Op: r.Op, ID: r.ID, ProducerID: r.ProducerID, Epoch: r.Epoch, TimeoutMs: r.TimeoutMs,
		Partitions: r.Partitions, Group: r.Group, Offsets: r.Offsets, Commit: r.Commit, Shards: r.Shards}
}

func txnRequestToV1(r TxnRequest) txnRequestV1 {
	return txnRequestV1{Op: r.Op, ID: r.ID, ProducerID: r.ProducerID, Epoch: r.Epoch, TimeoutMs: r.TimeoutMs,
		Partitions: r.Partitions, Group: r.Group, Offsets: r.Offsets, Commit: r.Commit, Shards: r.Shards}
}

func transactionToV1(t Transaction) transactionV1 {
	return transactionV1{ID: t.ID, ProducerID: t.ProducerID, Epoch: t.Epoch, State: t.State, TimeoutMs: t.TimeoutMs,
		StartTime: t.StartTime, UpdateTime: t.UpdateTime, Partitions: t.Partitions, Groups: t.Groups, Offsets: t.Offsets}
}

// The methods of version 2 of the two calls.
var (
	fwTxnV2          = wireMethod(fwTxn, 2)
	fwTransactionsV2 = wireMethod(fwTransactions, 2)
)

// serveTxnV1 and serveTransactionsV1 serve version 1 of the calls.
var (
	serveTxnV1 = served(func(ctx context.Context, _ *Coordinator, c *leader, req txnRequestV1) (transactionV1, error) {
		t, err := c.Txn(ctx, txnRequestFromV1(req))
		return transactionToV1(t), err
	})
	serveTransactionsV1 = served(func(ctx context.Context, _ *Coordinator, c *leader, req txnListCall) ([]transactionV1, error) {
		ts, err := c.Transactions(ctx, req.IDs)
		out := make([]transactionV1, len(ts))
		for i, t := range ts {
			out[i] = transactionToV1(t)
		}
		return out, err
	})
	serveTxnV2 = served(func(ctx context.Context, _ *Coordinator, c *leader, req TxnRequest) (Transaction, error) {
		return c.Txn(ctx, req)
	})
	serveTransactionsV2 = served(func(ctx context.Context, _ *Coordinator, c *leader, req txnListCall) ([]Transaction, error) {
		return c.Transactions(ctx, req.IDs)
	})
)

// txnBody encodes a txn call's request in the version asked for; a
// request of transactions v2 has no version 1 (nil: refused).
func txnBody(req TxnRequest) func(int) []byte {
	v1 := gobBody(txnRequestToV1(req))
	if req.V2 {
		v1 = func(int) []byte { return nil }
	}
	return versioned(v1, gobBody(req))
}

// errTxnV2Unspoken refuses a call of transactions v2 to a leader that
// speaks only version 1 of the txn call.
func errTxnV2Unspoken(shard int) error {
	return kafkaerr.New(kafkaerr.UnsupportedVersion,
		"coordinator: the leader of shard %d runs a release without transactions v2 (the txn call's version 2)", shard)
}
