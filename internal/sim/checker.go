package sim

import (
	"fmt"
	"sort"
	"strings"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Violation is a guarantee a history breaks.
type Violation struct {
	// Check is the guarantee's name (one of Checks).
	Check string
	// Detail says where.
	Detail string
}

// String prints the violation as "check: detail".
func (v Violation) String() string { return v.Check + ": " + v.Detail }

// Checks names the guarantees Check verifies, and says what each means.
var Checks = map[string]string{
	"acked-durable":           "an acknowledged record is read at the offset its acknowledgement gave, unless below the log start offset or, on a compacted topic, superseded by a later record of its key",
	"offset-unique":           "no offset of a partition holds two records (across every read and acknowledgement)",
	"record-once":             "no record is at two offsets",
	"no-phantom":              "every record read was produced to that partition",
	"offsets-increase":        "a read's offsets increase; a producer's acknowledged batches get increasing offsets",
	"hw-monotonic":            "the high watermark never goes back",
	"lso-monotonic":           "the last stable offset never goes back",
	"log-start-monotonic":     "the log start offset never goes back",
	"rc-no-aborted":           "read_committed never returns a record of an aborted transaction",
	"rc-below-lso":            "read_committed never returns a record at or past the last stable offset",
	"rc-txn-whole":            "read_committed shows a transaction whole or not at all",
	"txn-outcome":             "a transaction whose commit was acknowledged is visible to read_committed",
	"group-offset-monotonic":  "a group's committed offset never goes back (but for explicit resets), and is one that was committed",
	"txn-offsets":             "a group offset committed in a transaction that aborted is never the group's",
	"fenced-no-writes":        "a producer fenced by a newer epoch writes nothing after the fence",
	"compaction-keeps-latest": "compaction keeps the latest record of every key",
	"final-read":              "every partition can be read whole once the faults are over",
	"error-expected":          "no well-formed request of the workload is answered INVALID_REQUEST, CORRUPT_MESSAGE or INVALID_RECORD: codes that tell a correct client to give up",
	"restartable":             "a broker opens again, on its data folder or a wiped one, once the faults are over",
	"deleted-topic-gone":      "once a topic's delete is answered, no read returns its records, no read of another incarnation of its name returns them, and a topic created again under its name starts empty",
	"log-append-time":         "on a LogAppendTime topic a record reads with the LogAppendTime its produce was acknowledged with, and a partition's timestamps never go back as offsets grow by more than two leaders' clocks may differ (appendTimeSlack)",
	"list-offsets-time":       "a ListOffsets by time answers a record at or after the time asked, and no offset past an earlier record at or after it that was acknowledged before the call",
	"group-claim-fences":      "a group's claims grow, and no commit or delete of its offsets under a claim succeeds once a higher claim was answered",

	// The WAL objects' lifecycle (checker_objects.go).
	"object-deleted-after-batches": "no WAL object is gone from the store while a batch in it is still listed: no read for a fetch, a compaction or the final read finds an object gone that was written",
	"no-object-leak":               "every WAL object the final read did not need is deleted once its grace, and the orphan grace, are over",
}

// unexpectedCodes are the codes no request of the workload should get:
// each is a bug of the library (or of the workload), never a fault's
// effect, which is retriable or a fencing. UNKNOWN_SERVER_ERROR is not
// among them: the workload calls the Broker, whose plain errors (a
// metadata service that failed) kafkaserver maps to the retriable code
// of each request kind.
var unexpectedCodes = map[kafkaerr.Code]bool{
	kafkaerr.InvalidRequest: true,
	kafkaerr.CorruptMessage: true,
	kafkaerr.InvalidRecord:  true,
}

// checker accumulates violations, a few per check.
type checker struct {
	out   []Violation
	count map[string]int
}

func (c *checker) fail(check, format string, args ...any) {
	if _, ok := Checks[check]; !ok {
		panic("sim: unknown check " + check)
	}
	c.count[check]++
	if c.count[check] <= 5 {
		c.out = append(c.out, Violation{Check: check, Detail: fmt.Sprintf(format, args...)})
	}
}

// recMeta is what the history says of one produced record.
type recMeta struct {
	tp     string
	key    string
	run    string // its transaction, "" if none
	fenced bool
	acked  bool
	offset int64 // where its acknowledgement put it
	ackAt  int64 // the acknowledgement's Complete tick
}

func tpOf(e *Event) string { return fmt.Sprintf("%s/%d", e.Topic, e.Partition) }

// Check verifies every guarantee of Checks over a history (the events in
// the order they answered) and returns the violations found, a few per
// guarantee at most.
func Check(events []*Event) []Violation {
	c := &checker{count: map[string]int{}}
	recs := map[string]*recMeta{}
	finalRU := map[string]*Event{}
	finalRC := map[string]*Event{}
	for _, e := range events {
		if unexpectedCodes[e.Code] {
			c.fail("error-expected", "%s", e)
		}
		switch {
		case e.Op == OpProduce:
			for i, r := range e.Records {
				m := recs[r.Value]
				if m == nil {
					m = &recMeta{tp: tpOf(e), key: r.Key, run: e.TxnRun, fenced: e.Fenced}
					recs[r.Value] = m
				}
				if !e.OK() {
					continue
				}
				off := e.Offset + int64(i)
				if m.acked && m.offset != off {
					c.fail("record-once", "%s acknowledged at offsets %d and %d of %s", r.Value, m.offset, off, m.tp)
				}
				m.acked, m.offset, m.ackAt = true, off, e.Complete
			}
		case e.Op == OpFinalRead && e.OK() && e.ReadCommitted:
			finalRC[tpOf(e)] = e
		case e.Op == OpFinalRead && e.OK():
			finalRU[tpOf(e)] = e
		case e.Op == OpFinalRead:
			c.fail("final-read", "%s rc=%v: %v", tpOf(e), e.ReadCommitted, e.Err)
		case e.Op == OpRestart && e.Actor == "final" && !e.OK():
			c.fail("restartable", "broker %d: %v", e.Broker, e.Err)
		}
	}
	checkOffsets(c, events, recs)
	checkWatermarks(c, events)
	checkDurable(c, recs, finalRU)
	aborted := checkTxns(c, events, recs, finalRU, finalRC)
	checkGroups(c, events, aborted)
	checkFences(c, events, recs)
	checkDeletedTopics(c, events)
	checkAppendTime(c, events)
	checkListByTime(c, events)
	checkClaims(c, events)
	checkObjects(c, events)
	return c.out
}

// checkOffsets: offset-unique, record-once, no-phantom, offsets-increase.
func checkOffsets(c *checker, events []*Event, recs map[string]*recMeta) {
	at := map[string]map[int64]string{} // tp -> offset -> value
	where := map[string]int64{}         // value -> offset
	put := func(tp string, off int64, v string, what string) {
		if at[tp] == nil {
			at[tp] = map[int64]string{}
		}
		if old, ok := at[tp][off]; ok && old != v {
			c.fail("offset-unique", "%s offset %d holds %s and %s (%s)", tp, off, old, v, what)
		}
		at[tp][off] = v
		if old, ok := where[v]; ok && old != off {
			c.fail("record-once", "%s at offsets %d and %d of %s (%s)", v, old, off, tp, what)
		}
		where[v] = off
	}
	type lastAck struct {
		seq  int32
		base int64
	}
	acks := map[string]lastAck{}
	for _, e := range events {
		switch {
		case e.Op == OpProduce && e.OK():
			for i, r := range e.Records {
				put(tpOf(e), e.Offset+int64(i), r.Value, fmt.Sprintf("acknowledged at %d", e.Complete))
			}
			if e.Producer >= 0 {
				k := fmt.Sprintf("%s %d/%d", tpOf(e), e.Producer, e.Epoch)
				if l, ok := acks[k]; ok && e.Seq > l.seq && e.Offset <= l.base {
					c.fail("offsets-increase", "%s: seq %d at %d, after seq %d at %d", k, e.Seq, e.Offset, l.seq, l.base)
				}
				acks[k] = lastAck{e.Seq, e.Offset}
			}
		case (e.Op == OpFetch || e.Op == OpFinalRead) && e.OK():
			prev := int64(-1)
			for _, r := range e.Records {
				if r.Offset <= prev {
					c.fail("offsets-increase", "%s read at %d: offset %d after %d", tpOf(e), e.Complete, r.Offset, prev)
				}
				prev = r.Offset
				m := recs[r.Value]
				if m == nil || m.tp != tpOf(e) {
					c.fail("no-phantom", "%s offset %d holds %q, never produced there", tpOf(e), r.Offset, r.Value)
					continue
				}
				put(tpOf(e), r.Offset, r.Value, fmt.Sprintf("read at %d", e.Complete))
			}
		}
	}
}

// obs is one observation of a monotonic value.
type obs struct {
	invoke, complete int64
	v                int64
	what             string
}

// monotonic reports a violation of check for each observation that is
// below one completed before it started.
func monotonic(c *checker, check, key string, os []obs) {
	sort.Slice(os, func(i, j int) bool { return os[i].complete < os[j].complete })
	byInvoke := append([]obs(nil), os...)
	sort.Slice(byInvoke, func(i, j int) bool { return byInvoke[i].invoke < byInvoke[j].invoke })
	best, bestWhat := int64(-1), ""
	i := 0
	for _, o := range byInvoke {
		for i < len(os) && os[i].complete < o.invoke {
			if os[i].v > best {
				best, bestWhat = os[i].v, os[i].what
			}
			i++
		}
		if o.v < best {
			c.fail(check, "%s: %d (%s) after %d (%s)", key, o.v, o.what, best, bestWhat)
		}
	}
}

// checkWatermarks: hw-monotonic, lso-monotonic, log-start-monotonic,
// rc-below-lso.
func checkWatermarks(c *checker, events []*Event) {
	hw, lso, start := map[string][]obs{}, map[string][]obs{}, map[string][]obs{}
	for _, e := range events {
		if !e.OK() || (e.Op != OpFetch && e.Op != OpListOffsets && e.Op != OpFinalRead) {
			continue
		}
		k := tpOf(e)
		what := fmt.Sprintf("%s %d-%d", e.Op, e.Invoke, e.Complete)
		if e.HW >= 0 {
			hw[k] = append(hw[k], obs{e.Invoke, e.Complete, e.HW, what})
		}
		if e.LSO >= 0 {
			lso[k] = append(lso[k], obs{e.Invoke, e.Complete, e.LSO, what})
		}
		if e.LogStart >= 0 {
			start[k] = append(start[k], obs{e.Invoke, e.Complete, e.LogStart, what})
		}
		if e.ReadCommitted && e.LSO >= 0 {
			for _, r := range e.Records {
				if r.Offset >= e.LSO {
					c.fail("rc-below-lso", "%s %s: %s at %d, last stable offset %d", k, what, r.Value, r.Offset, e.LSO)
				}
			}
		}
	}
	for _, k := range sortedKeys(hw) {
		monotonic(c, "hw-monotonic", k, hw[k])
		monotonic(c, "lso-monotonic", k, lso[k])
		monotonic(c, "log-start-monotonic", k, start[k])
	}
}

// checkDurable: acked-durable, compaction-keeps-latest.
func checkDurable(c *checker, recs map[string]*recMeta, final map[string]*Event) {
	type keyOf struct{ tp, key string }
	latestRead := map[keyOf]int64{} // in the final read
	readAt := map[string]map[int64]string{}
	for tp, e := range final {
		readAt[tp] = map[int64]string{}
		for _, r := range e.Records {
			readAt[tp][r.Offset] = r.Value
			if r.Key != "" {
				k := keyOf{tp, r.Key}
				latestRead[k] = max(latestRead[k], r.Offset)
			}
		}
	}
	latestAcked := map[keyOf]int64{}
	for _, v := range sortedKeys(recs) {
		m := recs[v]
		if !m.acked || m.fenced {
			continue
		}
		e := final[m.tp]
		if e == nil {
			continue // final-read reports it
		}
		if m.key != "" {
			k := keyOf{m.tp, m.key}
			latestAcked[k] = max(latestAcked[k], m.offset)
		}
		if m.offset < e.LogStart {
			continue
		}
		got, ok := readAt[m.tp][m.offset]
		switch {
		case ok && got == v:
		case ok:
			c.fail("acked-durable", "%s acknowledged at %s offset %d, which holds %s", v, m.tp, m.offset, got)
		case m.key != "" && latestRead[keyOf{m.tp, m.key}] > m.offset:
			// compacted away: a later record of its key is there
		default:
			c.fail("acked-durable", "%s acknowledged at %s offset %d (tick %d) is lost (log start %d, high watermark %d)", v, m.tp, m.offset, m.ackAt, e.LogStart, e.HW)
		}
	}
	for k, off := range latestAcked {
		e := final[k.tp]
		if off < e.LogStart {
			continue
		}
		if latestRead[k] < off {
			c.fail("compaction-keeps-latest", "%s key %s: latest acknowledged at %d, latest read at %d", k.tp, k.key, off, latestRead[k])
		}
	}
}

// checkTxns: rc-no-aborted, rc-txn-whole, txn-outcome. It returns
// whether a transaction run is known to have aborted: its abort was
// acknowledged, or none of its records in the log is visible to
// read_committed.
func checkTxns(c *checker, events []*Event, recs map[string]*recMeta, finalRU, finalRC map[string]*Event) func(run string) bool {
	ended := map[string]bool{} // run -> committed, by an acknowledged EndTxn
	for _, e := range events {
		if e.Op == OpEndTxn && e.OK() {
			ended[e.TxnRun] = e.Commit
		}
	}
	// What the final reads show of each run: records in the log, and
	// of those, visible to read_committed.
	inLog, visible := map[string]int{}, map[string]int{}
	for tp, ru := range finalRU {
		rc := finalRC[tp]
		seen := map[string]bool{}
		if rc != nil {
			for _, r := range rc.Records {
				seen[r.Value] = true
			}
		}
		for _, r := range ru.Records {
			m := recs[r.Value]
			if m == nil || m.run == "" || rc == nil || r.Offset >= rc.LSO {
				continue
			}
			inLog[m.run]++
			if seen[r.Value] {
				visible[m.run]++
			}
		}
	}
	aborted := func(run string) bool {
		if commit, ok := ended[run]; ok {
			return !commit
		}
		return inLog[run] > 0 && visible[run] == 0
	}
	for _, run := range sortedKeys(inLog) {
		switch {
		case visible[run] > 0 && visible[run] < inLog[run]:
			c.fail("rc-txn-whole", "%s: %d of its %d records in the log are visible to read_committed", run, visible[run], inLog[run])
		case ended[run] && visible[run] == 0:
			c.fail("txn-outcome", "%s: its commit was acknowledged, and none of its %d records is visible to read_committed", run, inLog[run])
		}
	}
	for _, e := range events {
		if !e.ReadCommitted || !e.OK() {
			continue
		}
		for _, r := range e.Records {
			if m := recs[r.Value]; m != nil && m.run != "" && aborted(m.run) {
				c.fail("rc-no-aborted", "%s %s %d-%d: %s at %d, of aborted %s", tpOf(e), e.Op, e.Invoke, e.Complete, r.Value, r.Offset, m.run)
			}
		}
	}
	return aborted
}

// checkGroups: group-offset-monotonic, txn-offsets. A group's offsets
// are committed by one consumer, each commit at least the one before, or
// in the transactions of one transactional ID, each greater than the
// last; an explicit reset (DeleteOffsets) starts the group afresh, so
// observations are only compared within the stretch between two resets,
// and one that overlaps a reset is not compared at all.
func checkGroups(c *checker, events []*Event, aborted func(run string) bool) {
	seen := map[string][]obs{}
	tried := map[string]map[int64]string{} // value -> its transaction run, "" if none
	resets := map[string][][2]int64{}      // group -> [invoke, complete]
	txnOffsets := map[string][]*Event{}    // run -> its TxnCommitOffsets
	for _, e := range events {
		k := e.Group + " " + tpOf(e)
		switch {
		case e.Op == OpDeleteOffsets:
			resets[e.Group] = append(resets[e.Group], [2]int64{e.Invoke, e.Complete})
		case e.Op == OpCommitOffsets || e.Op == OpTxnOffsets:
			if tried[k] == nil {
				tried[k] = map[int64]string{}
			}
			tried[k][e.Offset] = e.TxnRun
			if e.Op == OpTxnOffsets {
				txnOffsets[e.TxnRun] = append(txnOffsets[e.TxnRun], e)
			} else if e.OK() {
				seen[k] = append(seen[k], obs{e.Invoke, e.Complete, e.Offset, fmt.Sprintf("commit %d-%d", e.Invoke, e.Complete)})
			}
		case e.Op == OpEndTxn && e.OK() && e.Commit:
			// The run's offsets became the group's within the end.
			for _, o := range txnOffsets[e.TxnRun] {
				if o.OK() {
					seen[o.Group+" "+tpOf(o)] = append(seen[o.Group+" "+tpOf(o)], obs{e.Invoke, e.Complete, o.Offset, fmt.Sprintf("%s committed %d-%d", e.TxnRun, e.Invoke, e.Complete)})
				}
			}
		case e.Op == OpFetchOffsets && e.OK() && e.Topic != "":
			seen[k] = append(seen[k], obs{e.Invoke, e.Complete, e.Offset, fmt.Sprintf("fetched %d-%d", e.Invoke, e.Complete)})
			run, ok := tried[k][e.Offset]
			switch {
			case !ok:
				c.fail("group-offset-monotonic", "%s: fetched %d, never committed", k, e.Offset)
			case run != "" && aborted(run):
				c.fail("txn-offsets", "%s: fetched %d, committed in %s, which aborted", k, e.Offset, run)
			}
		}
	}
	for _, k := range sortedKeys(seen) {
		group, _, _ := strings.Cut(k, " ")
		os := seen[k]
		for _, o := range os {
			// The end of the last reset before o, and whether one
			// overlaps it.
			var since int64
			overlaps := false
			for _, r := range resets[group] {
				switch {
				case r[1] < o.invoke:
					since = max(since, r[1])
				case r[0] < o.complete:
					overlaps = true
				}
			}
			if overlaps {
				continue
			}
			for _, p := range os {
				if p.complete < o.invoke && p.invoke > since && p.v > o.v {
					c.fail("group-offset-monotonic", "%s: %d (%s) after %d (%s)", k, o.v, o.what, p.v, p.what)
					break
				}
			}
		}
	}
}

// checkFences: fenced-no-writes.
func checkFences(c *checker, events []*Event, recs map[string]*recMeta) {
	type fence struct {
		pid   int64
		epoch int16
		at    int64
	}
	fences := map[string][]fence{} // txnID -> its InitTxn answers
	for _, e := range events {
		if e.Op == OpInitTxn && e.OK() {
			fences[e.TxnID] = append(fences[e.TxnID], fence{e.Producer, e.Epoch, e.Complete})
		}
	}
	fencedAt := func(txnID string, pid int64, epoch int16, invoke int64) bool {
		for _, f := range fences[txnID] {
			if f.at < invoke && f.pid == pid && f.epoch > epoch {
				return true
			}
		}
		return false
	}
	for _, e := range events {
		if e.TxnRun == "" || !e.OK() || (e.Op != OpProduce && e.Op != OpEndTxn) {
			continue
		}
		txnID, _, _ := strings.Cut(e.TxnRun, "#")
		if fencedAt(txnID, e.Producer, e.Epoch, e.Invoke) {
			c.fail("fenced-no-writes", "%s %s by %d/%d at %d-%d succeeded after a newer epoch fenced it", e.Op, e.TxnRun, e.Producer, e.Epoch, e.Invoke, e.Complete)
		}
	}
	for _, e := range events {
		if (e.Op != OpFetch && e.Op != OpFinalRead) || !e.OK() {
			continue
		}
		for _, r := range e.Records {
			if m := recs[r.Value]; m != nil && m.fenced {
				c.fail("fenced-no-writes", "%s at %s offset %d, written with a fenced epoch", r.Value, tpOf(e), r.Offset)
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
