package coordinator

// chainState is what replay knows of the log's chain after an entry: the
// epoch, the checksum of the last entry applied, and whether that is
// known (a database written before the chain was kept knows it only from
// the next claim on). See "Log entries" in the package doc.
type chainState struct {
	epoch int32
	crc   uint32
	known bool
}

// step decides whether replay applies e, whose checksum is crc, after the
// entries that led to s, and returns the state after it. An entry of an
// older epoch is skipped (its leader was fenced). A claim (an entry with
// an epoch record) is applied: a new leader's first entry follows
// whatever is there. Any other entry is applied only if it follows the
// last entry applied (its prev is that entry's checksum): one that does
// not was sent behind a put that failed, by a pipelining leader, and
// landed after another leader's entry or a gap.
func (s chainState) step(e entry, crc uint32) (apply bool, next chainState) {
	if e.Epoch < s.epoch {
		return false, s
	}
	claim := claims(e)
	if !claim && e.Chained && s.known && e.Prev != s.crc {
		return false, s
	}
	next = chainState{epoch: s.epoch, crc: crc, known: true}
	if claim {
		next.epoch = e.Epoch // as its epoch record sets the view's
	}
	return true, next
}

// claims reports whether e carries an epoch record: a leader's claim.
func claims(e entry) bool {
	for _, r := range e.Records {
		if _, ok := r.(epochRecord); ok {
			return true
		}
	}
	return false
}
