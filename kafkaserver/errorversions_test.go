package kafkaserver

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/diskless-go/diskless/internal/kafkatest"
	"github.com/diskless-go/diskless/kafkaerr"
)

// setErrorCodes sets every error code field of v (a response struct),
// reached through one element added to each of its slices, to code, and
// returns how many it set.
func setErrorCodes(v reflect.Value, code int16) int {
	n := 0
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			n += setErrorCodes(v.Elem(), code)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f, sf := v.Field(i), v.Type().Field(i)
			switch {
			case !sf.IsExported():
			case (sf.Name == "ErrorCode" || sf.Name == "PartitionErrorCode") && f.Kind() == reflect.Int16:
				f.SetInt(int64(code))
				n++
			case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
				if f.Len() == 0 {
					f.Set(reflect.Append(f, reflect.New(f.Type().Elem()).Elem()))
				}
				for j := range f.Len() {
					n += setErrorCodes(f.Index(j), code)
				}
			case f.Kind() == reflect.Struct:
				n += setErrorCodes(f, code)
			}
		}
	}
	return n
}

// errorCodes returns the values of every error code field of v.
func errorCodes(v reflect.Value) []int16 {
	var out []int16
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			out = append(out, errorCodes(v.Elem())...)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f, sf := v.Field(i), v.Type().Field(i)
			switch {
			case !sf.IsExported():
			case sf.Name == "ErrorCode" || sf.Name == "PartitionErrorCode":
				out = append(out, int16(f.Int()))
			case f.Kind() == reflect.Slice:
				for j := range f.Len() {
					out = append(out, errorCodes(f.Index(j))...)
				}
			case f.Kind() == reflect.Struct:
				out = append(out, errorCodes(f)...)
			}
		}
	}
	return out
}

// TestErrorDowngrades checks every row of errorDowngrades on a response
// with the newer code in each of its error code fields (reached by
// reflection here, independently of the walkers): a version below the
// row's gets the older code in every field, the row's version (where
// the row stops) keeps the newer one. The rows name served APIs, at
// versions the server serves, once each.
func TestErrorDowngrades(t *testing.T) {
	seen := map[[2]int16]bool{}
	for i, d := range errorDowngrades {
		name := fmt.Sprintf("%s<%d/%s", kmsg.NameForKey(d.key), d.below, d.newer)
		t.Run(name, func(t *testing.T) {
			if i > 0 {
				require.LessOrEqual(t, errorDowngrades[i-1].key, d.key, "the table is in key order")
			}
			require.NotEqual(t, d.newer, d.older)
			require.False(t, seen[[2]int16{d.key, int16(d.newer)}], "one row per key and code")
			seen[[2]int16{d.key, int16(d.newer)}] = true
			served, ok := versionsOf(d.key)
			require.True(t, ok, "the server serves the API")
			require.Greater(t, d.below, served.min, "the row applies to a served version")

			check := func(version int16, want kafkaerr.Code) {
				t.Helper()
				resp := kmsg.ResponseForKey(d.key)
				resp.SetVersion(version)
				require.Positive(t, setErrorCodes(reflect.ValueOf(resp), int16(d.newer)))
				downgradeErrors(d.key, version, resp)
				for _, c := range errorCodes(reflect.ValueOf(resp)) {
					require.Equal(t, want, kafkaerr.Code(c), "version %d", version)
				}
			}
			check(served.min, d.older)
			if d.below == everyVersion {
				check(served.max, d.older)
				return
			}
			check(d.below-1, d.older)
			check(d.below, d.newer)
		})
	}
	// Codes the table does not name pass at every version.
	resp := kmsg.NewPtrEndTxnResponse()
	resp.ErrorCode = int16(kafkaerr.InvalidTxnState)
	downgradeErrors(resp.Key(), 0, resp)
	require.Equal(t, int16(kafkaerr.InvalidTxnState), resp.ErrorCode)
	downgradeErrors(resp.Key(), 0, nil) // acks 0: no response
}

// pinnedClient returns a client of p that sends key at version (the
// highest both sides speak, as clients pick it).
func pinnedClient(t *testing.T, p *testBroker, key, version int16) *kgo.Client {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(key, version)
	return p.client(t, kgo.MaxVersions(vs))
}

// TestFencedProducerErrorsByVersion drives the fencing rows end to end:
// a second producer of a transactional ID fences the first, whose calls
// are then answered INVALID_PRODUCER_EPOCH at the versions before
// PRODUCER_FENCED (InitProducerId 3, AddPartitionsToTxn, AddOffsetsToTxn
// and EndTxn 1), PRODUCER_FENCED from them on, and INVALID_PRODUCER_EPOCH
// at every version of TxnOffsetCommit.
func TestFencedProducerErrorsByVersion(t *testing.T) {
	p := startBroker(t, nil)
	ctx := t.Context()
	kafkatest.CreateTopic(t, p.client(t), "fenced", 1, nil)
	txid := "tx-fenced"
	initProducer := func(cl *kgo.Client, version int16, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
		t.Helper()
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &txid, 60_000
		req.ProducerID, req.ProducerEpoch = pid, epoch
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Equal(t, version, resp.Version)
		return resp
	}
	first := initProducer(pinnedClient(t, p, 22, 4), 4, -1, -1)
	require.Zero(t, first.ErrorCode)
	second := initProducer(pinnedClient(t, p, 22, 4), 4, -1, -1)
	require.Zero(t, second.ErrorCode)
	require.Equal(t, first.ProducerID, second.ProducerID)
	require.Greater(t, second.ProducerEpoch, first.ProducerEpoch, "the second producer fences the first")
	pid, old := first.ProducerID, first.ProducerEpoch

	epochOld, fenced := int16(kafkaerr.InvalidProducerEpoch), int16(kafkaerr.ProducerFenced)
	type call func(cl *kgo.Client) (kmsg.Response, int16)
	addPartitions := func(cl *kgo.Client) (kmsg.Response, int16) {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = txid, pid, old
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = "fenced", []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		return resp, resp.Topics[0].Partitions[0].ErrorCode
	}
	addOffsets := func(cl *kgo.Client) (kmsg.Response, int16) {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txid, pid, old, "readers"
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		return resp, resp.ErrorCode
	}
	endTxn := func(cl *kgo.Client) (kmsg.Response, int16) {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txid, pid, old, true
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		return resp, resp.ErrorCode
	}
	bumpEpoch := func(cl *kgo.Client) (kmsg.Response, int16) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &txid, 60_000
		req.ProducerID, req.ProducerEpoch = pid, old // KIP-360: the fenced producer asks to carry on
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		return resp, resp.ErrorCode
	}
	commitOffsets := func(cl *kgo.Client) (kmsg.Response, int16) {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txid, pid, old, "readers"
		req.Generation = -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "fenced"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = 0, 1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		return resp, resp.Topics[0].Partitions[0].ErrorCode
	}
	for _, c := range []struct {
		key     int16
		version int16
		want    int16
		call    call
	}{
		{24, 0, epochOld, addPartitions},
		{24, 1, epochOld, addPartitions},
		{24, 2, fenced, addPartitions},
		{24, 3, fenced, addPartitions},
		{25, 1, epochOld, addOffsets},
		{25, 2, fenced, addOffsets},
		{25, 3, fenced, addOffsets},
		{26, 1, epochOld, endTxn},
		{26, 2, fenced, endTxn},
		{26, 3, fenced, endTxn},
		{22, 3, epochOld, bumpEpoch},
		{22, 4, fenced, bumpEpoch},
		{28, 0, epochOld, commitOffsets},
		{28, 3, epochOld, commitOffsets},
	} {
		t.Run(fmt.Sprintf("%s/v%d", kmsg.NameForKey(c.key), c.version), func(t *testing.T) {
			resp, code := c.call(pinnedClient(t, p, c.key, c.version))
			require.Equal(t, c.version, resp.GetVersion())
			require.Equal(t, kafkaerr.Code(c.want), kafkaerr.Code(code))
		})
	}

	// The current producer is not fenced: its transaction carries on.
	end := kmsg.NewPtrEndTxnRequest()
	end.Version = 1
	end.TransactionalID, end.ProducerID, end.ProducerEpoch = txid, pid, second.ProducerEpoch
	resp, err := end.RequestWith(ctx, pinnedClient(t, p, 26, 1))
	require.NoError(t, err)
	require.NotEqual(t, epochOld, resp.ErrorCode)
	require.NotEqual(t, fenced, resp.ErrorCode)
}

// TestMetadataTopicIDByVersion: a topic asked for by ID only is
// UNKNOWN_TOPIC_ID from Metadata 12, which asks by ID, and
// INVALID_REQUEST before it.
func TestMetadataTopicIDByVersion(t *testing.T) {
	p := startBroker(t, nil)
	for _, c := range []struct {
		version int16
		want    kafkaerr.Code
	}{{10, kafkaerr.InvalidRequest}, {11, kafkaerr.InvalidRequest}, {12, kafkaerr.UnknownTopicID}} {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = [16]byte(uuid.New())
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(t.Context(), pinnedClient(t, p, 3, c.version))
		require.NoError(t, err)
		require.Equal(t, c.version, resp.Version)
		require.Len(t, resp.Topics, 1)
		require.Equal(t, c.want, kafkaerr.Code(resp.Topics[0].ErrorCode), "version %d", c.version)
	}
}

// TestDowngradeProduceAllocs: Produce's rows apply at every version, so
// every Produce response is walked; the walk allocates nothing.
func TestDowngradeProduceAllocs(t *testing.T) {
	resp := kmsg.NewPtrProduceResponse()
	for range 4 {
		rt := kmsg.NewProduceResponseTopic()
		for range 8 {
			rt.Partitions = append(rt.Partitions, kmsg.NewProduceResponseTopicPartition())
		}
		resp.Topics = append(resp.Topics, rt)
	}
	resp.Topics[0].Partitions[0].ErrorCode = int16(kafkaerr.ProducerFenced)
	allocs := testing.AllocsPerRun(100, func() { downgradeErrors(resp.Key(), 11, resp) })
	require.Zero(t, allocs)
	require.Equal(t, int16(kafkaerr.InvalidProducerEpoch), resp.Topics[0].Partitions[0].ErrorCode)
}

// TestOffsetFetchGroupErrorByVersion: OffsetFetch before version 2 has no
// group-level error code; a group's error is on each partition asked
// for, as Kafka answers it. The trigger is the group ID "", which this
// server refuses (INVALID_GROUP_ID) before anything else.
func TestOffsetFetchGroupErrorByVersion(t *testing.T) {
	p := startBroker(t, nil)
	kafkatest.CreateTopic(t, p.client(t), "fetched", 2, nil)
	for _, version := range []int16{1, 2} {
		req := kmsg.NewPtrOffsetFetchRequest()
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "fetched", []int32{0, 1}
		req.Topics = append(req.Topics, rt)
		// To the broker itself: a client looking the coordinator of ""
		// up is refused before it asks.
		kresp, err := pinnedClient(t, p, 9, version).SeedBrokers()[0].Request(t.Context(), req)
		require.NoError(t, err)
		resp := kresp.(*kmsg.OffsetFetchResponse)
		require.Equal(t, version, resp.Version)
		if version >= 2 {
			require.Equal(t, int16(kafkaerr.InvalidGroupID), resp.ErrorCode)
			continue
		}
		require.Len(t, resp.Topics, 1)
		require.Equal(t, "fetched", resp.Topics[0].Topic)
		require.Len(t, resp.Topics[0].Partitions, 2)
		for i, rp := range resp.Topics[0].Partitions {
			require.Equal(t, int32(i), rp.Partition)
			require.Equal(t, int16(kafkaerr.InvalidGroupID), rp.ErrorCode)
			require.Equal(t, int64(-1), rp.Offset)
		}
	}
}

// TestOffsetCommitMemberEpochByVersion: a member of a consumer group
// (KIP-848) committing at an epoch ahead of its own is
// FENCED_MEMBER_EPOCH from OffsetCommit 9, and UNSUPPORTED_VERSION
// before it, as Kafka refuses such a member's commits below version 9.
func TestOffsetCommitMemberEpochByVersion(t *testing.T) {
	p := startBroker(t, nil)
	cl := p.client(t)
	kafkatest.CreateTopic(t, cl, "events", 1, nil)
	m := &cgMember{t: t, cl: cl, group: "g", id: "member-a", topic: topicID(t, cl, "events")}
	require.Zero(t, m.heartbeat([]int32{}).ErrorCode)
	for _, c := range []struct {
		version int16
		want    kafkaerr.Code
	}{{8, kafkaerr.UnsupportedVersion}, {9, kafkaerr.FencedMemberEpoch}} {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.MemberID, req.Generation = m.group, m.id, m.epoch+1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "events"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(t.Context(), pinnedClient(t, p, 8, c.version))
		require.NoError(t, err)
		require.Equal(t, c.version, resp.Version)
		require.Equal(t, c.want, kafkaerr.Code(resp.Topics[0].Partitions[0].ErrorCode), "version %d", c.version)
	}
}

// TestErrorVersionsTxnV2: the versions of transactions v2 (Produce 12,
// EndTxn 5, TxnOffsetCommit 5) need no rows of their own, and the rows
// that apply at every version reach them: their implicit adds' fenced
// producer is INVALID_PRODUCER_EPOCH on Produce and TxnOffsetCommit and
// PRODUCER_FENCED on EndTxn, and a coordinator that could not add the
// partition is NOT_ENOUGH_REPLICAS on Produce, as Kafka answers.
func TestErrorVersionsTxnV2(t *testing.T) {
	for _, c := range []struct {
		resp      kmsg.Response
		version   int16
		from, saw kafkaerr.Code
	}{
		{kmsg.NewPtrProduceResponse(), 12, kafkaerr.ProducerFenced, kafkaerr.InvalidProducerEpoch},
		{kmsg.NewPtrProduceResponse(), 12, kafkaerr.ConcurrentTransactions, kafkaerr.NotEnoughReplicas},
		{kmsg.NewPtrProduceResponse(), 12, kafkaerr.CoordinatorNotAvailable, kafkaerr.NotEnoughReplicas},
		{kmsg.NewPtrProduceResponse(), 12, kafkaerr.InvalidProducerIDMapping, kafkaerr.InvalidProducerIDMapping},
		{kmsg.NewPtrProduceResponse(), 12, kafkaerr.UnsupportedVersion, kafkaerr.UnsupportedVersion},
		{kmsg.NewPtrEndTxnResponse(), 5, kafkaerr.ProducerFenced, kafkaerr.ProducerFenced},
		{kmsg.NewPtrEndTxnResponse(), 4, kafkaerr.ProducerFenced, kafkaerr.ProducerFenced},
		{kmsg.NewPtrTxnOffsetCommitResponse(), 5, kafkaerr.ProducerFenced, kafkaerr.InvalidProducerEpoch},
		{kmsg.NewPtrTxnOffsetCommitResponse(), 5, kafkaerr.TransactionAbortable, kafkaerr.TransactionAbortable},
		{kmsg.NewPtrTxnOffsetCommitResponse(), 3, kafkaerr.TransactionAbortable, kafkaerr.InvalidTxnState},
	} {
		c.resp.SetVersion(c.version)
		require.Positive(t, setErrorCodes(reflect.ValueOf(c.resp), int16(c.from)))
		downgradeErrors(c.resp.Key(), c.version, c.resp)
		for _, got := range errorCodes(reflect.ValueOf(c.resp)) {
			require.Equal(t, int16(c.saw), got, "%s v%d: %s", kmsg.NameForKey(c.resp.Key()), c.version, c.from)
		}
	}
}
