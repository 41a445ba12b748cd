package sim

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Op is the kind of an Event.
type Op string

// The operations a History records.
const (
	OpCreateTopic   Op = "create-topic"
	OpAddPartitions Op = "add-partitions"
	OpProduce       Op = "produce"
	OpFetch         Op = "fetch"
	OpListOffsets   Op = "list-offsets"
	OpInitProducer  Op = "init-producer"
	OpInitTxn       Op = "init-txn"
	OpAddTxnParts   Op = "add-txn-partitions"
	OpEndTxn        Op = "end-txn"
	OpCommitOffsets Op = "commit-offsets"
	OpFetchOffsets  Op = "fetch-offsets"
	OpDeleteOffsets Op = "delete-offsets"
	OpTxnOffsets    Op = "txn-commit-offsets"
	OpDeleteRecords Op = "delete-records"
	OpCompact       Op = "compact"
	OpDeleteTopic   Op = "delete-topic"
	OpAlterConfig   Op = "alter-config"
	OpListByTime    Op = "list-offsets-time"
	OpClaimGroup    Op = "claim-group"
	OpFault         Op = "fault"
	OpCrash         Op = "crash"
	OpRestart       Op = "restart"
	OpFinalRead     Op = "final-read"
)

// Rec is one record as a call sent or read it.
type Rec struct {
	// Offset is where it was read (-1 in a produce).
	Offset int64
	// Key and Value are the record's; the workload makes every value
	// unique, so a value names a record.
	Key, Value string
	// Producer and Epoch are the batch's producer, Txn whether the
	// batch was transactional.
	Producer int64
	Epoch    int16
	Txn      bool
	// Timestamp is the record's timestamp as a read returned it (the
	// batch's LogAppendTime on such a topic); 0 in a produce.
	Timestamp int64
}

// Event is one call of the workload (or one fault), from its start to its
// answer. Fields that do not apply to its Op are zero.
type Event struct {
	// Invoke and Complete order events: each is a tick of one counter,
	// taken when the call started and when it answered, so that A
	// happened before B when A.Complete < B.Invoke.
	Invoke, Complete int64
	// At is the virtual time of the answer since the run began.
	At time.Duration
	// Actor is who made the call.
	Actor string
	Op    Op
	// Broker is the broker called, Process its incarnation.
	Broker int

	// Topic is the topic's tag: its name, followed by "@" and its
	// incarnation when a topic of that name was deleted before it was
	// created (see topic.tag), so that the checks tell the records of a
	// deleted topic from those of the topic created again in its place.
	Topic     string
	Partition int32
	// Records are what a produce sent or a fetch returned (a
	// read_committed fetch: what a consumer keeps, aborted batches and
	// markers dropped).
	Records []Rec
	// Producer, Epoch, Seq are a produce's or a transaction's producer.
	Producer int64
	Epoch    int16
	Seq      int32
	// TxnID is the transactional ID, TxnRun the transaction's name within
	// the history (unique), Commit whether an end commits.
	TxnID  string
	TxnRun string
	Commit bool
	// Offset is a produce's base offset, a fetch's start, a committed or
	// fetched group offset, a DeleteRecords target.
	Offset int64
	// Group is a consumer group.
	Group string
	// ReadCommitted is a fetch's isolation level.
	ReadCommitted bool
	// HW, LSO and LogStart are a fetch's or a ListOffsets' answer (-1
	// when unknown).
	HW, LSO, LogStart int64
	// Timestamp is a produce's acknowledged LogAppendTime (-1 on a
	// CreateTime topic) or the timestamp a ListOffsets by time asked for;
	// Found is the timestamp of the record that ListOffsets answered (-1
	// for none).
	Timestamp, Found int64
	// Claim is the group claim's epoch a ClaimGroup answered or a commit
	// of group offsets was made under (0 for none).
	Claim int64
	// Fenced is set on a produce made on purpose with an epoch that a
	// later InitTxnProducer fenced.
	// On a commit of group offsets, it is set when the commit was made
	// on purpose under a claim that a later ClaimGroup replaced.
	Fenced bool
	// Err is the call's error, nil on success; Code its Kafka code.
	Err  error
	Code kafkaerr.Code
	// Note says more about a fault.
	Note string
}

// OK reports whether the call succeeded.
func (e *Event) OK() bool { return e.Err == nil }

// String prints the event on one line.
func (e *Event) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "%6d %12v %-8s @%d %-18s", e.Complete, e.At.Round(time.Millisecond), e.Actor, e.Broker, e.Op)
	if e.Topic != "" {
		fmt.Fprintf(&s, " %s/%d", e.Topic, e.Partition)
	}
	if e.Producer != 0 || e.Op == OpProduce {
		fmt.Fprintf(&s, " pid=%d/%d seq=%d", e.Producer, e.Epoch, e.Seq)
	}
	if e.TxnRun != "" {
		fmt.Fprintf(&s, " txn=%s", e.TxnRun)
	}
	if e.Op == OpEndTxn {
		fmt.Fprintf(&s, " commit=%v", e.Commit)
	}
	if e.Group != "" {
		fmt.Fprintf(&s, " group=%s", e.Group)
	}
	switch e.Op {
	case OpProduce, OpFetch, OpCommitOffsets, OpFetchOffsets, OpTxnOffsets, OpDeleteRecords, OpFinalRead, OpListByTime:
		fmt.Fprintf(&s, " off=%d", e.Offset)
	}
	if e.Op == OpListByTime || e.Op == OpProduce && e.Timestamp >= 0 {
		fmt.Fprintf(&s, " ts=%d", e.Timestamp)
	}
	if e.Op == OpListByTime {
		fmt.Fprintf(&s, " found=%d", e.Found)
	}
	if e.Claim != 0 {
		fmt.Fprintf(&s, " claim=%d", e.Claim)
	}
	if e.Op == OpFetch || e.Op == OpListOffsets || e.Op == OpFinalRead {
		fmt.Fprintf(&s, " rc=%v hw=%d lso=%d start=%d", e.ReadCommitted, e.HW, e.LSO, e.LogStart)
	}
	if len(e.Records) > 0 {
		fmt.Fprintf(&s, " recs=%d[%s..%s]", len(e.Records), e.Records[0].Value, e.Records[len(e.Records)-1].Value)
	}
	if e.Fenced {
		s.WriteString(" fenced")
	}
	if e.Note != "" {
		fmt.Fprintf(&s, " %s", e.Note)
	}
	if e.Err != nil {
		fmt.Fprintf(&s, " err=%v", e.Code)
		if e.Code == kafkaerr.NoError || e.Code == kafkaerr.UnknownServerError {
			fmt.Fprintf(&s, " (%.80s)", e.Err.Error())
		}
	}
	return s.String()
}

// History records events. It is safe for concurrent use.
type History struct {
	start time.Time
	mu    struct {
		sync.Mutex
		tick   int64
		events []*Event
	}
}

// NewHistory returns an empty history whose virtual time starts now.
func NewHistory() *History { return &History{start: time.Now()} }

// Begin starts an event: it takes its Invoke tick.
func (h *History) Begin(actor string, op Op) *Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.tick++
	return &Event{Invoke: h.mu.tick, Actor: actor, Op: op, HW: -1, LSO: -1, LogStart: -1, Offset: -1, Timestamp: -1, Found: -1}
}

// End records e with its answer: err (with its Kafka code) and the
// Complete tick and time.
func (h *History) End(e *Event, err error) *Event {
	e.Err = err
	if err != nil {
		e.Code = kafkaerr.CodeOf(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.tick++
	e.Complete = h.mu.tick
	e.At = time.Since(h.start)
	h.mu.events = append(h.mu.events, e)
	return e
}

// Events returns the events recorded so far, in the order they answered.
func (h *History) Events() []*Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*Event(nil), h.mu.events...)
}

// Tail prints the last n events, one a line.
func (h *History) Tail(n int) string {
	evs := h.Events()
	evs = evs[max(0, len(evs)-n):]
	var s strings.Builder
	for _, e := range evs {
		s.WriteString(e.String())
		s.WriteByte('\n')
	}
	return s.String()
}

// Trace prints every event with its virtual time and without its ticks,
// the events that answered at one virtual instant sorted: two runs of one
// seed that made the same calls with the same answers at the same virtual
// times have the same Trace, whatever order the scheduler ran the
// goroutines of an instant in.
func (h *History) Trace() string {
	var lines []string
	var s strings.Builder
	var at time.Duration
	flush := func() {
		slices.Sort(lines)
		for _, l := range lines {
			s.WriteString(l)
			s.WriteByte('\n')
		}
		lines = lines[:0]
	}
	for _, e := range h.Events() {
		if e.At != at {
			flush()
			at = e.At
		}
		c := *e
		c.Invoke, c.Complete = 0, 0
		lines = append(lines, c.String())
	}
	flush()
	return s.String()
}

// Summary counts the events by operation, as "op ok/failed", and the
// fenced writes, in a line.
func (h *History) Summary() string {
	type count struct{ ok, failed int }
	counts := map[Op]*count{}
	var ops []Op
	for _, e := range h.Events() {
		op := e.Op
		if e.Fenced {
			op += "(fenced)"
		}
		c := counts[op]
		if c == nil {
			c = &count{}
			counts[op] = c
			ops = append(ops, op)
		}
		if e.OK() {
			c.ok++
		} else {
			c.failed++
		}
	}
	slices.Sort(ops)
	var s strings.Builder
	for i, op := range ops {
		if i > 0 {
			s.WriteString(", ")
		}
		fmt.Fprintf(&s, "%s %d/%d", op, counts[op].ok, counts[op].failed)
	}
	return s.String()
}
