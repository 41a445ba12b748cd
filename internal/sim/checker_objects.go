package sim

// checkObjects: object-deleted-after-batches, no-object-leak.
//
// A broker reads a WAL object only for a batch its shard lists (a fetch,
// the final read, a compaction), so a read that finds an object gone
// that was written is a batch listed in an object that is not there: a
// delete before the batches went, or a store that lost the object. It is
// reported when the read was made for a call of the history: one on the
// same broker under way at the time (a fetch that failed
// KAFKA_STORAGE_ERROR for it, or the final read, which reads every batch
// listed with the caches emptied). A read of a deleted object by a
// reader slower than the deletion grace would be one too; the
// simulation's faults stall a call for far less than the grace.
//
// The objects the final read did not need are gone long after it
// (objectsTail); each still there is reported as leaked.
func checkObjects(c *checker, events []*Event) {
	for i, e := range events {
		switch e.Op {
		case OpObjectLeft:
			c.fail("no-object-leak", "%s", e.Note)
		case OpObjectMissing:
			// The call under way on that broker when the read missed:
			// it began before the read and answered after it.
			for _, r := range events[i+1:] {
				if r.Broker != e.Broker || r.Invoke > e.Invoke {
					continue
				}
				if r.Op == OpFetch || r.Op == OpFinalRead || r.Op == OpCompact {
					c.fail("object-deleted-after-batches", "broker %d read %s during %s", e.Broker, e.Note, r)
					break
				}
			}
		}
	}
}
