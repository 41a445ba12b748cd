package sim

import (
	"errors"
	"slices"
	"testing"

	"github.com/diskless-go/diskless/kafkaerr"
)

// hist builds a history by hand: each event gets the next two ticks.
type hist struct {
	events []*Event
	tick   int64
}

func (h *hist) add(e Event) *hist {
	h.tick++
	e.Invoke = h.tick
	h.tick++
	e.Complete = h.tick
	if e.Op == OpFetch || e.Op == OpFinalRead || e.Op == OpListOffsets {
		if e.HW == 0 && e.LSO == 0 && e.LogStart == 0 {
			e.HW, e.LSO, e.LogStart = -1, -1, -1
		}
	}
	h.events = append(h.events, &e)
	return h
}

func recs(vals ...string) []Rec {
	var out []Rec
	for i, v := range vals {
		out = append(out, Rec{Offset: int64(i), Value: v})
	}
	return out
}

func at(off int64, vals ...string) []Rec {
	out := recs(vals...)
	for i := range out {
		out[i].Offset = off + int64(i)
	}
	return out
}

func produced(off int64, vals ...string) Event {
	return Event{Op: OpProduce, Topic: "t", Records: recs(vals...), Offset: off, Producer: 1}
}

func final(hw int64, rc bool, r []Rec) Event {
	return Event{Op: OpFinalRead, Topic: "t", Records: r, HW: hw, LSO: hw, LogStart: 0, ReadCommitted: rc}
}

// TestCheck: each history breaks one guarantee, and Check names it; a
// history that keeps them all has no violation.
func TestCheck(t *testing.T) {
	errLost := errors.New("lost answer")
	errUnknownTopic := kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "no topic")
	errNotCoordinator := kafkaerr.New(kafkaerr.NotCoordinator, "an older claim")
	txn := func(e Event, run string) Event { e.TxnRun = run; return e }
	for _, tc := range []struct {
		name string
		h    *hist
		want []string
	}{
		{"clean", new(hist).add(produced(0, "a", "b")).add(final(2, false, at(0, "a", "b"))).add(final(2, true, at(0, "a", "b"))), nil},
		{"acked record lost", new(hist).add(produced(0, "a", "b")).add(final(2, false, at(0, "a"))).add(final(2, true, at(0, "a"))), []string{"acked-durable"}},
		{"two records at an offset", new(hist).add(produced(0, "a")).add(produced(0, "b")).add(final(1, false, at(0, "a"))).add(final(1, true, at(0, "a"))),
			[]string{"acked-durable", "offset-unique"}},
		{"a record at two offsets", new(hist).add(produced(0, "a")).add(Event{Op: OpProduce, Topic: "t", Records: recs("b"), Producer: 2, Err: errLost}).
			add(final(3, false, at(0, "a", "b", "b"))).add(final(3, true, at(0, "a", "b", "b"))), []string{"record-once"}},
		{"phantom", new(hist).add(final(1, false, at(0, "z"))).add(final(1, true, at(0, "z"))), []string{"no-phantom"}},
		{"high watermark back", new(hist).add(Event{Op: OpListOffsets, Topic: "t", HW: 5, LSO: 5, LogStart: 0}).add(Event{Op: OpListOffsets, Topic: "t", HW: 4, LSO: 4, LogStart: 0}),
			[]string{"hw-monotonic", "lso-monotonic"}},
		{"log start back", new(hist).add(Event{Op: OpListOffsets, Topic: "t", HW: 5, LSO: 5, LogStart: 3}).add(Event{Op: OpListOffsets, Topic: "t", HW: 5, LSO: 5, LogStart: 2}),
			[]string{"log-start-monotonic"}},
		{"aborted transaction read", new(hist).add(txn(produced(0, "a"), "x#1")).add(Event{Op: OpEndTxn, TxnRun: "x#1", Commit: false}).
			add(Event{Op: OpFetch, Topic: "t", ReadCommitted: true, Records: at(0, "a"), HW: 2, LSO: 2, LogStart: 0}).
			add(final(2, false, at(0, "a"))).add(final(2, true, nil)), []string{"rc-no-aborted"}},
		{"open transaction read", new(hist).add(txn(produced(0, "a"), "x#1")).
			add(Event{Op: OpFetch, Topic: "t", ReadCommitted: true, Records: at(0, "a"), HW: 1, LSO: 0, LogStart: 0}), []string{"rc-below-lso"}},
		{"half a transaction", new(hist).add(txn(produced(0, "a", "b"), "x#1")).add(Event{Op: OpEndTxn, TxnRun: "x#1", Commit: true}).
			add(final(3, false, at(0, "a", "b"))).add(final(3, true, at(0, "a"))), []string{"rc-txn-whole"}},
		{"committed transaction hidden", new(hist).add(txn(produced(0, "a"), "x#1")).add(Event{Op: OpEndTxn, TxnRun: "x#1", Commit: true}).
			add(final(2, false, at(0, "a"))).add(final(2, true, nil)), []string{"txn-outcome"}},
		{"group offset back", new(hist).add(Event{Op: OpCommitOffsets, Group: "g", Topic: "t", Offset: 5}).add(Event{Op: OpCommitOffsets, Group: "g", Topic: "t", Offset: 3, Err: errLost}).
			add(Event{Op: OpFetchOffsets, Group: "g", Topic: "t", Offset: 3}), []string{"group-offset-monotonic"}},
		{"group offset back after a reset", new(hist).add(Event{Op: OpCommitOffsets, Group: "g", Topic: "t", Offset: 5}).add(Event{Op: OpDeleteOffsets, Group: "g"}).
			add(Event{Op: OpCommitOffsets, Group: "g", Topic: "t", Offset: 3}).add(Event{Op: OpFetchOffsets, Group: "g", Topic: "t", Offset: 3}), nil},
		{"aborted transaction's offset", new(hist).add(txn(produced(0, "a"), "x#1")).
			add(Event{Op: OpTxnOffsets, TxnRun: "x#1", Group: "g", Topic: "t", Offset: 9}).add(Event{Op: OpEndTxn, TxnRun: "x#1", Commit: false}).
			add(Event{Op: OpFetchOffsets, Group: "g", Topic: "t", Offset: 9}), []string{"txn-offsets"}},
		{"committed transaction's offset back", new(hist).add(txn(produced(0, "a"), "x#1")).
			add(Event{Op: OpTxnOffsets, TxnRun: "x#1", Group: "g", Topic: "t", Offset: 9}).add(Event{Op: OpEndTxn, TxnRun: "x#1", Commit: true}).
			add(Event{Op: OpTxnOffsets, TxnRun: "x#0", Group: "g", Topic: "t", Offset: 8, Err: errLost}).
			add(Event{Op: OpFetchOffsets, Group: "g", Topic: "t", Offset: 8}), []string{"group-offset-monotonic"}},
		{"fenced producer writes", new(hist).add(Event{Op: OpInitTxn, TxnID: "x", Producer: 7, Epoch: 1}).
			add(Event{Op: OpProduce, Topic: "t", Records: recs("a"), Offset: 0, Producer: 7, Epoch: 0, TxnRun: "x#zombie", Fenced: true}),
			[]string{"fenced-no-writes"}},
		{"compaction drops the latest", new(hist).add(Event{Op: OpProduce, Topic: "t", Records: []Rec{{Key: "k", Value: "a"}, {Key: "k", Value: "b"}}, Offset: 0, Producer: 1}).
			add(final(2, false, []Rec{{Offset: 0, Key: "k", Value: "a"}})).add(final(2, true, []Rec{{Offset: 0, Key: "k", Value: "a"}})),
			[]string{"acked-durable", "compaction-keeps-latest"}},
		{"compaction keeps the latest", new(hist).add(Event{Op: OpProduce, Topic: "t", Records: []Rec{{Key: "k", Value: "a"}, {Key: "k", Value: "b"}}, Offset: 0, Producer: 1}).
			add(final(2, false, []Rec{{Offset: 1, Key: "k", Value: "b"}})).add(final(2, true, []Rec{{Offset: 1, Key: "k", Value: "b"}})), nil},
		{"deleted topic gone", new(hist).add(produced(0, "a")).add(Event{Op: OpDeleteTopic, Topic: "t"}).
			add(Event{Op: OpFetch, Topic: "t", Err: errUnknownTopic}).
			add(Event{Op: OpListOffsets, Topic: "t@1", HW: 0, LSO: 0, LogStart: 0}).
			add(Event{Op: OpProduce, Topic: "t@1", Records: recs("b"), Offset: 0, Producer: 2}).
			add(Event{Op: OpFinalRead, Topic: "t@1", Records: at(0, "b"), HW: 1, LSO: 1, LogStart: 0}).
			add(Event{Op: OpFinalRead, Topic: "t@1", Records: at(0, "b"), HW: 1, LSO: 1, LogStart: 0, ReadCommitted: true}), nil},
		{"deleted topic read", new(hist).add(produced(0, "a")).add(Event{Op: OpDeleteTopic, Topic: "t"}).
			add(Event{Op: OpFetch, Topic: "t", Records: at(0, "a"), HW: 1, LSO: 1, LogStart: 0}), []string{"deleted-topic-gone"}},
		{"deleted topic's record in its successor", new(hist).add(produced(0, "a")).add(Event{Op: OpDeleteTopic, Topic: "t", Err: errUnknownTopic}).
			add(Event{Op: OpProduce, Topic: "t@1", Records: recs("b"), Offset: 1, Producer: 2}).
			add(Event{Op: OpFinalRead, Topic: "t@1", Records: at(0, "a", "b"), HW: 2, LSO: 2, LogStart: 0}).
			add(Event{Op: OpFinalRead, Topic: "t@1", Records: at(1, "b"), HW: 2, LSO: 2, LogStart: 1, ReadCommitted: true}), []string{"deleted-topic-gone", "no-phantom"}},
		{"topic created again not empty", new(hist).add(produced(0, "a")).add(Event{Op: OpDeleteTopic, Topic: "t"}).
			add(Event{Op: OpListOffsets, Topic: "t@1", HW: 1, LSO: 1, LogStart: 0}), []string{"deleted-topic-gone"}},
		{"log append time kept", new(hist).add(Event{Op: OpProduce, Topic: "t", Records: recs("a"), Offset: 0, Producer: 1, Timestamp: 100}).
			add(Event{Op: OpProduce, Topic: "t", Records: recs("b"), Offset: 1, Producer: 1, Seq: 1, Timestamp: 100}).
			add(final(2, false, []Rec{{Offset: 0, Value: "a", Timestamp: 100}, {Offset: 1, Value: "b", Timestamp: 100}})).
			add(final(2, true, []Rec{{Offset: 0, Value: "a", Timestamp: 100}, {Offset: 1, Value: "b", Timestamp: 100}})), nil},
		{"log append time changed", new(hist).add(Event{Op: OpProduce, Topic: "t", Records: recs("a"), Offset: 0, Producer: 1, Timestamp: 100}).
			add(final(1, false, []Rec{{Offset: 0, Value: "a", Timestamp: 101}})).add(final(1, true, []Rec{{Offset: 0, Value: "a", Timestamp: 101}})),
			[]string{"log-append-time"}},
		{"log append time back", new(hist).add(Event{Op: OpProduce, Topic: "t", Records: recs("a"), Offset: 0, Producer: 1, Timestamp: 10_000}).
			add(Event{Op: OpProduce, Topic: "t", Records: recs("b"), Offset: 1, Producer: 1, Seq: 1, Timestamp: 4_999}),
			[]string{"log-append-time"}},
		{"log append time back within the slack", new(hist).add(Event{Op: OpProduce, Topic: "t", Records: recs("a"), Offset: 0, Producer: 1, Timestamp: 10_000}).
			add(Event{Op: OpProduce, Topic: "t", Records: recs("b"), Offset: 1, Producer: 1, Seq: 1, Timestamp: 5_000}),
			nil},
		{"list by time", new(hist).add(Event{Op: OpProduce, Topic: "t", Records: recs("a", "b"), Offset: 0, Producer: 1}).
			add(Event{Op: OpListByTime, Topic: "t", Timestamp: 15, Offset: 1, Found: 20}).
			add(final(2, false, []Rec{{Offset: 0, Value: "a", Timestamp: 10}, {Offset: 1, Value: "b", Timestamp: 20}})).
			add(final(2, true, []Rec{{Offset: 0, Value: "a", Timestamp: 10}, {Offset: 1, Value: "b", Timestamp: 20}})), nil},
		{"list by time past the record", new(hist).add(Event{Op: OpProduce, Topic: "t", Records: recs("a", "b"), Offset: 0, Producer: 1}).
			add(Event{Op: OpListByTime, Topic: "t", Timestamp: 5, Offset: 1, Found: 20}).
			add(final(2, false, []Rec{{Offset: 0, Value: "a", Timestamp: 10}, {Offset: 1, Value: "b", Timestamp: 20}})).
			add(final(2, true, []Rec{{Offset: 0, Value: "a", Timestamp: 10}, {Offset: 1, Value: "b", Timestamp: 20}})), []string{"list-offsets-time"}},
		{"list by time finds none", new(hist).add(Event{Op: OpProduce, Topic: "t", Records: recs("a", "b"), Offset: 0, Producer: 1}).
			add(Event{Op: OpListByTime, Topic: "t", Timestamp: 15, Offset: -1, Found: -1}).
			add(final(2, false, []Rec{{Offset: 0, Value: "a", Timestamp: 10}, {Offset: 1, Value: "b", Timestamp: 20}})).
			add(final(2, true, []Rec{{Offset: 0, Value: "a", Timestamp: 10}, {Offset: 1, Value: "b", Timestamp: 20}})), []string{"list-offsets-time"}},
		{"list by time answers an earlier record", new(hist).add(Event{Op: OpListByTime, Topic: "t", Timestamp: 15, Offset: 0, Found: 10}),
			[]string{"list-offsets-time"}},
		{"group claims fence", new(hist).add(Event{Op: OpClaimGroup, Group: "g", Claim: 1}).add(Event{Op: OpCommitOffsets, Group: "g", Topic: "t", Offset: 1, Claim: 1}).
			add(Event{Op: OpClaimGroup, Group: "g", Claim: 2}).add(Event{Op: OpCommitOffsets, Group: "g", Topic: "t", Offset: 2, Claim: 1, Fenced: true, Err: errNotCoordinator}).
			add(Event{Op: OpCommitOffsets, Group: "g", Topic: "t", Offset: 3, Claim: 2}), nil},
		{"fenced claim commits", new(hist).add(Event{Op: OpClaimGroup, Group: "g", Claim: 1}).add(Event{Op: OpClaimGroup, Group: "g", Claim: 2}).
			add(Event{Op: OpCommitOffsets, Group: "g", Topic: "t", Offset: 2, Claim: 1, Fenced: true}), []string{"group-claim-fences"}},
		{"claim goes back", new(hist).add(Event{Op: OpClaimGroup, Group: "g", Claim: 2}).add(Event{Op: OpClaimGroup, Group: "g", Claim: 2}),
			[]string{"group-claim-fences"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, v := range Check(tc.h.events) {
				if !slices.Contains(got, v.Check) {
					got = append(got, v.Check)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("violations %v, want %v: %v", got, tc.want, Check(tc.h.events))
			}
		})
	}
}
