package segment

import (
	"bytes"
	"strconv"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// The leader-epoch checkpoint (docs/formats.md, "Leader-epoch checkpoint"; Kafka's
// LeaderEpochCheckpointFile over CheckpointFile, and the rules of
// LeaderEpochFileCache.assign).

// leaderEpochCheckpointVersion is the version line of a leader-epoch
// checkpoint. It is part of the format.
const leaderEpochCheckpointVersion = 0

// EpochEntry is one entry of a leader-epoch cache: the first offset
// written in a leader epoch.
type EpochEntry struct {
	// Epoch is the partition leader epoch.
	Epoch int32
	// StartOffset is the first offset of the epoch.
	StartOffset int64
}

// AppendLeaderEpochCheckpoint appends entries as Kafka writes a
// leader-epoch-checkpoint file (and the leader-epoch index of a remote
// segment): the version line "0", the entry count, then one
// "<epoch> <startOffset>" line per entry, each line ending with "\n".
func AppendLeaderEpochCheckpoint(dst []byte, entries []EpochEntry) []byte {
	dst = strconv.AppendInt(dst, leaderEpochCheckpointVersion, 10)
	dst = append(dst, '\n')
	dst = strconv.AppendInt(dst, int64(len(entries)), 10)
	dst = append(dst, '\n')
	for _, e := range entries {
		dst = strconv.AppendInt(dst, int64(e.Epoch), 10)
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, e.StartOffset, 10)
		dst = append(dst, '\n')
	}
	return dst
}

// ParseLeaderEpochCheckpoint reads a leader-epoch checkpoint as Kafka's
// CheckpointFile.CheckpointReadBuffer does: lines end with "\n", "\r" or
// "\r\n" (the last may have no end); no line at all, or a version line and
// no count line, is no entries; otherwise the version must be 0, the count
// must equal the number of entry lines that follow it, and each entry line
// must be an int32 epoch and an int64 start offset separated by white
// space (Java's \s+: spaces, tabs, vertical tabs, form feeds; trailing
// white space is allowed, leading is not). Numbers are read as Java's
// Integer.parseInt and Long.parseLong read them: an optional sign, then
// decimal digits (ASCII only here; Java also takes other Unicode digits).
// Anything else is CORRUPT_MESSAGE. The values are not checked further:
// Kafka's cache refuses negative ones when it loads them.
func ParseLeaderEpochCheckpoint(b []byte) ([]EpochEntry, error) {
	lines := checkpointLines(b)
	if len(lines) == 0 {
		return nil, nil
	}
	version, err := strconv.ParseInt(string(lines[0]), 10, 32)
	if err != nil {
		return nil, kafkaerr.New(kafkaerr.CorruptMessage, "malformed version line %q in leader-epoch checkpoint", lines[0])
	}
	if version != leaderEpochCheckpointVersion {
		return nil, kafkaerr.New(kafkaerr.CorruptMessage, "leader-epoch checkpoint has version %d, expected %d", version, leaderEpochCheckpointVersion)
	}
	if len(lines) == 1 {
		return nil, nil
	}
	count, err := strconv.ParseInt(string(lines[1]), 10, 32)
	if err != nil {
		return nil, kafkaerr.New(kafkaerr.CorruptMessage, "malformed entry count line %q in leader-epoch checkpoint", lines[1])
	}
	if count < 0 {
		return nil, kafkaerr.New(kafkaerr.CorruptMessage, "leader-epoch checkpoint has a negative entry count %d", count)
	}
	lines = lines[2:]
	entries := make([]EpochEntry, 0, min(int(count), len(lines)))
	for _, line := range lines {
		e, ok := parseEpochLine(line)
		if !ok {
			return nil, kafkaerr.New(kafkaerr.CorruptMessage, "malformed line %q in leader-epoch checkpoint", line)
		}
		entries = append(entries, e)
	}
	if int64(len(entries)) != count {
		return nil, kafkaerr.New(kafkaerr.CorruptMessage, "leader-epoch checkpoint says %d entries but has %d", count, len(entries))
	}
	return entries, nil
}

// checkpointLines splits b into lines as Java's BufferedReader.readLine
// does.
func checkpointLines(b []byte) [][]byte {
	var lines [][]byte
	for len(b) > 0 {
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			lines = append(lines, b)
			break
		}
		lines = append(lines, b[:i])
		if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
			i++
		}
		b = b[i+1:]
	}
	return lines
}

// isJavaSpace reports whether c is in Java's regular expression class \s
// (less the line ends, which cannot occur within a line).
func isJavaSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\v' || c == '\f' }

// parseEpochLine parses "<epoch> <startOffset>" as Kafka's
// LeaderEpochCheckpointFile.Formatter does: the line split on \s+ must
// give exactly two fields (Java's split drops trailing empty fields but
// keeps a leading one).
func parseEpochLine(line []byte) (EpochEntry, bool) {
	if len(line) == 0 || isJavaSpace(line[0]) {
		return EpochEntry{}, false
	}
	var fields [2][]byte
	n := 0
	for i := 0; i < len(line); {
		if isJavaSpace(line[i]) {
			i++
			continue
		}
		j := i
		for j < len(line) && !isJavaSpace(line[j]) {
			j++
		}
		if n == len(fields) {
			return EpochEntry{}, false
		}
		fields[n] = line[i:j]
		n++
		i = j
	}
	if n != 2 {
		return EpochEntry{}, false
	}
	epoch, err := strconv.ParseInt(string(fields[0]), 10, 32)
	if err != nil {
		return EpochEntry{}, false
	}
	offset, err := strconv.ParseInt(string(fields[1]), 10, 64)
	if err != nil {
		return EpochEntry{}, false
	}
	return EpochEntry{Epoch: int32(epoch), StartOffset: offset}, true
}

// LeaderEpochsOfBatches returns the leader-epoch cache that Kafka builds
// from the partition leader epochs of batches (whole v2 batches, such as a
// segment's .log), starting empty: each batch with a leader epoch >= 0 and
// a base offset >= 0 is assigned as (epoch, base offset) by
// LeaderEpochFileCache.assign's rules. An assignment changes the cache
// only when the cache is empty, the epoch differs from the latest
// entry's, or the offset is below the latest entry's start offset; it
// then removes, from the latest back, the entries whose epoch or start
// offset is at or above the new one's, and appends it. The entries come
// out with epochs and start offsets both ascending. Iteration stops at the
// first batch that does not frame.
func LeaderEpochsOfBatches(batches []byte) []EpochEntry {
	var cache []EpochEntry
	it := kbatch.NewBatchIter(batches)
	for it.Next() {
		b := it.Batch()
		cache = assignEpoch(cache, EpochEntry{Epoch: b.PartitionLeaderEpoch(), StartOffset: b.BaseOffset()})
	}
	return cache
}

// assignEpoch is LeaderEpochFileCache.assign over cache; an entry with a
// negative epoch or offset (which Kafka refuses) leaves it as it is.
func assignEpoch(cache []EpochEntry, e EpochEntry) []EpochEntry {
	if e.Epoch < 0 || e.StartOffset < 0 {
		return cache
	}
	if n := len(cache); n > 0 && cache[n-1].Epoch == e.Epoch && e.StartOffset >= cache[n-1].StartOffset {
		return cache
	}
	for n := len(cache); n > 0 && (cache[n-1].Epoch >= e.Epoch || cache[n-1].StartOffset >= e.StartOffset); n-- {
		cache = cache[:n-1]
	}
	return append(cache, e)
}
