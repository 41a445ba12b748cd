package sim

import (
	"sort"
	"strings"
	"time"

	"github.com/diskless-go/diskless/kafkaerr"
)

// The checks of the workload's later calls: topic deletes, LogAppendTime
// topics, ListOffsets by time and group claims. Each is one function,
// called from Check, and names its guarantee in Checks.

// topicName is the name of the topic a tag (topic.tag) names.
func topicName(tag string) string {
	name, _, _ := strings.Cut(tag, "@")
	return name
}

// isRead reports whether e is a successful read of records.
func isRead(e *Event) bool {
	return (e.Op == OpFetch || e.Op == OpFinalRead) && e.OK()
}

// checkDeletedTopics: deleted-topic-gone. A topic incarnation is deleted
// once a DeleteTopic of it was answered OK, or UNKNOWN_TOPIC_OR_PARTITION
// (an earlier try, whose answer was lost, deleted it). From then on, a
// read of it returns none of its records; no read of a topic returns a
// record produced to another incarnation of its name; and a topic
// created again under the name of a deleted one starts empty: what a
// read or ListOffsets saw of one of its partitions before any produce to
// that partition was sent has log start and high watermark 0.
func checkDeletedTopics(c *checker, events []*Event) {
	deleted := map[string]int64{}     // tag -> when its delete answered
	producedTo := map[string]string{} // value -> the tag it was produced to
	firstProduce := map[string]int64{}
	for _, e := range events {
		switch {
		case e.Op == OpDeleteTopic && (e.OK() || e.Code == kafkaerr.UnknownTopicOrPartition):
			if _, ok := deleted[e.Topic]; !ok {
				deleted[e.Topic] = e.Complete
			}
		case e.Op == OpProduce:
			for _, r := range e.Records {
				if _, ok := producedTo[r.Value]; !ok {
					producedTo[r.Value] = e.Topic
				}
			}
			if f, ok := firstProduce[tpOf(e)]; !ok || e.Invoke < f {
				firstProduce[tpOf(e)] = e.Invoke
			}
		}
	}
	for _, e := range events {
		if isRead(e) {
			if at, ok := deleted[e.Topic]; ok && at < e.Invoke && len(e.Records) > 0 {
				c.fail("deleted-topic-gone", "%s %s %d-%d returned %d records (%s at %d) after its delete answered at %d", tpOf(e), e.Op, e.Invoke, e.Complete, len(e.Records), e.Records[0].Value, e.Records[0].Offset, at)
			}
			for _, r := range e.Records {
				if t, ok := producedTo[r.Value]; ok && t != e.Topic && topicName(t) == topicName(e.Topic) {
					c.fail("deleted-topic-gone", "%s %s %d-%d: %s at %d was produced to %s, another incarnation", tpOf(e), e.Op, e.Invoke, e.Complete, r.Value, r.Offset, t)
					break
				}
			}
		}
		if !e.OK() || e.Topic == topicName(e.Topic) || (e.Op != OpListOffsets && !isRead(e)) {
			continue
		}
		if f, ok := firstProduce[tpOf(e)]; ok && f < e.Complete {
			continue
		}
		if e.HW > 0 || e.LogStart > 0 {
			c.fail("deleted-topic-gone", "%s created again: %s %d-%d saw log start %d, high watermark %d before any produce", tpOf(e), e.Op, e.Invoke, e.Complete, e.LogStart, e.HW)
		}
	}
}

// checkAppendTime: log-append-time. On a LogAppendTime topic a record
// reads with the LogAppendTime its produce was acknowledged with, and
// the timestamps of a partition, acknowledged or read, never go back as
// offsets grow by more than appendTimeSlack.
// appendTimeSlack is how far a LogAppendTime may go back as offsets grow:
// it is the clock of the shard's leader at the commit, as Kafka's is its
// partition leader's, and two leaders' clocks differ (by up to the
// run's skew, 2 s in the fixed seeds), so across a change of leader it
// may go back by as much.
const appendTimeSlack = 5 * time.Second

func checkAppendTime(c *checker, events []*Event) {
	acked := map[string]int64{} // value -> acknowledged LogAppendTime
	type point struct {
		off, ts int64
		what    string
	}
	series := map[string][]point{}
	for _, e := range events {
		// A LogAppendTime is a time since 1970: positive (a hand-made
		// history's zero is none).
		if e.Op != OpProduce || !e.OK() || e.Timestamp <= 0 {
			continue
		}
		for i, r := range e.Records {
			acked[r.Value] = e.Timestamp
			series[tpOf(e)] = append(series[tpOf(e)], point{e.Offset + int64(i), e.Timestamp, "acknowledged " + r.Value})
		}
	}
	for _, e := range events {
		if !isRead(e) {
			continue
		}
		for _, r := range e.Records {
			ts, ok := acked[r.Value]
			if !ok {
				continue
			}
			if r.Timestamp != ts {
				c.fail("log-append-time", "%s %s %d-%d: %s at %d reads with timestamp %d, acknowledged with LogAppendTime %d", tpOf(e), e.Op, e.Invoke, e.Complete, r.Value, r.Offset, r.Timestamp, ts)
			}
		}
		if _, ok := series[tpOf(e)]; ok {
			for _, r := range e.Records {
				series[tpOf(e)] = append(series[tpOf(e)], point{r.Offset, r.Timestamp, "read " + r.Value})
			}
		}
	}
	for _, tp := range sortedKeys(series) {
		s := series[tp]
		sort.SliceStable(s, func(i, j int) bool { return s[i].off < s[j].off })
		for i := 1; i < len(s); i++ {
			if s[i].off > s[i-1].off && s[i].ts < s[i-1].ts-appendTimeSlack.Milliseconds() {
				c.fail("log-append-time", "%s: offset %d (%s) has LogAppendTime %d, below %d of offset %d (%s)", tp, s[i].off, s[i].what, s[i].ts, s[i-1].ts, s[i-1].off, s[i-1].what)
				break
			}
		}
	}
}

// checkListByTime: list-offsets-time. A ListOffsets by time answers a
// record whose timestamp is at or after the one asked, and never an
// offset past a record with such a timestamp that was acknowledged
// before the call and is in the final read (then it was in the log at
// the call: the log start only rises, and neither compaction nor
// retention adds records). Transactional records are left out: whether
// a lookup by time sees the records of an open transaction is not the
// question.
func checkListByTime(c *checker, events []*Event) {
	ackedAt := map[string]int64{}
	final := map[string]*Event{}
	for _, e := range events {
		switch {
		case e.Op == OpProduce && e.OK():
			for _, r := range e.Records {
				if _, ok := ackedAt[r.Value]; !ok {
					ackedAt[r.Value] = e.Complete
				}
			}
		case e.Op == OpFinalRead && e.OK() && !e.ReadCommitted:
			final[tpOf(e)] = e
		}
	}
	for _, e := range events {
		if e.Op != OpListByTime || !e.OK() {
			continue
		}
		if e.Offset >= 0 && e.Found < e.Timestamp {
			c.fail("list-offsets-time", "%s %d-%d: asked %d, answered offset %d of timestamp %d", tpOf(e), e.Invoke, e.Complete, e.Timestamp, e.Offset, e.Found)
		}
		f := final[tpOf(e)]
		if f == nil {
			continue
		}
		for _, r := range f.Records {
			if at, ok := ackedAt[r.Value]; !ok || at >= e.Invoke || r.Txn || r.Offset < f.LogStart {
				continue
			}
			if r.Timestamp >= e.Timestamp && (e.Offset < 0 || r.Offset < e.Offset) {
				c.fail("list-offsets-time", "%s %d-%d: asked %d, answered offset %d, but %s at %d has timestamp %d and was acknowledged before", tpOf(e), e.Invoke, e.Complete, e.Timestamp, e.Offset, r.Value, r.Offset, r.Timestamp)
				break
			}
		}
	}
}

// checkClaims: group-claim-fences. The claims of a group grow: a
// ClaimGroup answers an epoch above every one answered before it
// started; and a commit or delete of group offsets under a claim
// succeeds only if no higher claim of the group was answered before it
// started.
func checkClaims(c *checker, events []*Event) {
	type claim struct{ epoch, invoke, complete int64 }
	claims := map[string][]claim{}
	for _, e := range events {
		if e.Op != OpClaimGroup || !e.OK() {
			continue
		}
		for _, o := range claims[e.Group] {
			if o.complete < e.Invoke && o.epoch >= e.Claim {
				c.fail("group-claim-fences", "group %s: claim %d at %d-%d after claim %d at %d-%d", e.Group, e.Claim, e.Invoke, e.Complete, o.epoch, o.invoke, o.complete)
				break
			}
		}
		claims[e.Group] = append(claims[e.Group], claim{e.Claim, e.Invoke, e.Complete})
	}
	for _, e := range events {
		if (e.Op != OpCommitOffsets && e.Op != OpDeleteOffsets) || !e.OK() || e.Claim <= 0 {
			continue
		}
		for _, o := range claims[e.Group] {
			if o.complete < e.Invoke && o.epoch > e.Claim {
				c.fail("group-claim-fences", "group %s: %s under claim %d at %d-%d succeeded after claim %d answered at %d", e.Group, e.Op, e.Claim, e.Invoke, e.Complete, o.epoch, o.complete)
				break
			}
		}
	}
}
