package kafkaserver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/internal/kafkatest"
	"github.com/diskless-go/diskless/kbatch"
)

// sendReq frames req (its version set) on a raw connection and returns
// the correlation ID.
func (r *rawConn) sendReq(req kmsg.Request) int32 {
	return r.send(req.Key(), req.GetVersion(), req.IsFlexible(), req.AppendTo(nil))
}

// recvResp reads the next response into resp (of the request's version)
// and returns its correlation ID.
func (r *rawConn) recvResp(resp kmsg.Response) int32 {
	r.t.Helper()
	corr, body, err := r.recv()
	require.NoError(r.t, err)
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		body = body[1:] // the response header's empty tagged fields
	}
	require.NoError(r.t, resp.ReadFrom(body))
	return corr
}

// produceReq is a Produce request (version 11, acks -1) of one batch to
// partition 0 of topic.
func produceReq(t *testing.T, topic string, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 11, -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// idempotentBatch builds a batch of n records of producer pid at seq.
func idempotentBatch(t *testing.T, pid int64, seq int32, n int) []byte {
	b := kbatch.NewBuilder(kbatch.CodecNone)
	b.SetProducer(pid, 0, seq)
	for i := range n {
		b.Append(time.Now().UnixMilli(), nil, []byte{byte(seq), byte(i)})
	}
	out, err := b.Build(nil)
	require.NoError(t, err)
	return out
}

// fetchReq is a Fetch request (version 12) of partitions of topic from
// offset, without a session unless epoch says.
func fetchReq(topic string, offset int64, maxWait int32, sessionID, epoch int32, partitions ...int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, maxWait, 1, 1<<20
	req.SessionID, req.SessionEpoch = sessionID, epoch
	if len(partitions) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		for _, p := range partitions {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// TestPipelining sends requests on one connection without waiting for
// the answers: a long-poll Fetch of an empty partition, then five
// Produce requests of one idempotent producer to it. Served one at a time
// the fetch would hold the connection for its whole MaxWait (a minute) and
// the produce requests would wait behind it; served concurrently, the
// produce requests go through, their records end the long poll, and the
// answers come in request order, every batch committed in the order sent
// (the sequence numbers checked in that order).
func TestPipelining(t *testing.T) {
	p := startBroker(t, nil)
	cl := p.client(t)
	kafkatest.CreateTopic(t, cl, "pipe", 1, nil)
	init := kmsg.NewPtrInitProducerIDRequest()
	iresp, err := init.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(iresp.ErrorCode))

	raw := dialRaw(t, p.addr)
	var corrs []int32
	corrs = append(corrs, raw.sendReq(fetchReq("pipe", 0, 60_000, 0, -1, 0)))
	const n = 5
	for i := range n {
		corrs = append(corrs, raw.sendReq(produceReq(t, "pipe", idempotentBatch(t, iresp.ProducerID, int32(i*3), 3))))
	}
	fresp := kmsg.NewPtrFetchResponse()
	fresp.Version = 12
	require.Equal(t, corrs[0], raw.recvResp(fresp), "the fetch, answered first")
	require.NoError(t, kerr.ErrorForCode(fresp.Topics[0].Partitions[0].ErrorCode))
	require.NotEmpty(t, fresp.Topics[0].Partitions[0].RecordBatches, "woken by the produce requests after it")
	for i := range n {
		presp := kmsg.NewPtrProduceResponse()
		presp.Version = 11
		require.Equal(t, corrs[1+i], raw.recvResp(presp), "answers in request order")
		pp := presp.Topics[0].Partitions[0]
		require.NoError(t, kerr.ErrorForCode(pp.ErrorCode), "produce %d", i)
		require.Equal(t, int64(i*3), pp.BaseOffset, "produce %d committed in order", i)
	}

	// A request other than produce and fetch waits for those before it:
	// an OffsetCommit then an OffsetFetch, pipelined, see each other.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 9, "pipe-group", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "pipe"
	ct.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7, LeaderEpoch: -1}}
	commit.Topics = append(commit.Topics, ct)
	ofetch := kmsg.NewPtrOffsetFetchRequest()
	ofetch.Version = 9
	ofetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "pipe-group", MemberEpoch: -1}}
	c1, c2 := raw.sendReq(commit), raw.sendReq(ofetch)
	cresp := kmsg.NewPtrOffsetCommitResponse()
	cresp.Version = 9
	require.Equal(t, c1, raw.recvResp(cresp))
	require.NoError(t, kerr.ErrorForCode(cresp.Topics[0].Partitions[0].ErrorCode))
	oresp := kmsg.NewPtrOffsetFetchResponse()
	oresp.Version = 9
	require.Equal(t, c2, raw.recvResp(oresp))
	require.Len(t, oresp.Groups, 1)
	require.Equal(t, int64(7), oresp.Groups[0].Topics[0].Partitions[0].Offset)
}
