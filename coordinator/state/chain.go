package state

// ChainState is what replay knows of the log's chain after an entry: the
// epoch, the checksum of the last entry applied, and whether that is
// known (a database written before the chain was kept knows it only from
// the next claim on). See "Log entries" in the package doc.
type ChainState struct {
	Epoch int32
	CRC   uint32
	Known bool
}

// Step decides whether replay applies e, whose checksum is crc, after the
// entries that led to s, and returns the state after it. An entry of an
// older epoch is skipped (its leader was fenced). A claim (an entry with
// an epoch record) is applied: a new leader's first entry follows
// whatever is there. Any other entry is applied only if it follows the
// last entry applied (its prev is that entry's checksum): one that does
// not was sent behind a put that failed, by a pipelining leader, and
// landed after another leader's entry or a gap.
func (s ChainState) Step(e Entry, crc uint32) (apply bool, next ChainState) {
	if e.Epoch < s.Epoch {
		return false, s
	}
	claim := Claims(e)
	if !claim && e.Chained && s.Known && e.Prev != s.CRC {
		return false, s
	}
	next = ChainState{Epoch: s.Epoch, CRC: crc, Known: true}
	if claim {
		next.Epoch = e.Epoch // as its epoch record sets the view's
	}
	return true, next
}

// Claims reports whether e carries an epoch record: a leader's claim.
func Claims(e Entry) bool {
	for _, r := range e.Records {
		if _, ok := r.(EpochRecord); ok {
			return true
		}
	}
	return false
}
