package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// The files of a partition directory besides its segments. Kafka keeps the
// checkpoints and the clean shutdown marker once per log directory, with a
// "topic partition offset" line per partition; a Log owns one partition's
// directory and knows no topic, so it keeps them there, with one entry
// that is the bare offset. The names are part of the format.
const (
	// recoveryPointFile holds the recovery point: every offset below it
	// was flushed, so recovery after a crash starts from the segment that
	// holds it.
	recoveryPointFile = "recovery-point-offset-checkpoint"
	// logStartOffsetFile holds the log start offset, which DeleteRecords
	// may have raised above the first segment's base offset.
	logStartOffsetFile = "log-start-offset-checkpoint"
	// cleanerOffsetFile holds the first dirty offset: where the next
	// Compact's map of keys starts.
	cleanerOffsetFile = "cleaner-offset-checkpoint"
	// cleanShutdownFile marks a clean Close; OpenLog removes it.
	cleanShutdownFile = ".kafka_cleanshutdown"
	// checkpointVersion is the version line of a checkpoint file.
	checkpointVersion = 0
	// tmpSuffix marks a file being written, renamed into place when whole.
	tmpSuffix = ".tmp"
)

// cleanShutdownContent is what Kafka writes in its marker (a JSON object
// with a version and the broker epoch; a Log has no broker epoch).
var cleanShutdownContent = []byte(`{"version":0,"brokerEpoch":-1}`)

// writeCheckpoint writes a checkpoint file in the layout of Kafka's
// checkpoint files (CheckpointFile: a version line, an entry count line,
// the entries) with one entry, the bare offset, where Kafka's entries are
// "topic partition offset":
//
//	0
//	1
//	<offset>
//
// It writes a temporary file, syncs it, renames it into place and syncs
// the directory, so a crash leaves the old file or the new one.
func writeCheckpoint(dir, name string, offset int64) error {
	content := fmt.Appendf(nil, "%d\n1\n%d\n", checkpointVersion, offset)
	return writeFileAtomic(dir, name, content)
}

// readCheckpoint reads a checkpoint file; ok is false when it is missing
// or does not hold one non-negative offset in the format writeCheckpoint
// writes (the caller then falls back as Kafka does).
func readCheckpoint(dir, name string) (offset int64, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	offset, ok = parseCheckpoint(b)
	return offset, ok, nil
}

// parseCheckpoint parses a checkpoint's content.
func parseCheckpoint(b []byte) (int64, bool) {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) != 3 || string(lines[0]) != strconv.Itoa(checkpointVersion) || string(lines[1]) != "1" {
		return 0, false
	}
	offset, err := strconv.ParseInt(string(lines[2]), 10, 64)
	if err != nil || offset < 0 {
		return 0, false
	}
	return offset, true
}

// writeCleanShutdown writes the clean shutdown marker.
func writeCleanShutdown(dir string) error {
	return writeFileAtomic(dir, cleanShutdownFile, cleanShutdownContent)
}

// writeFileAtomic writes dir/name through a synced temporary file and a
// rename, then syncs the directory.
func writeFileAtomic(dir, name string, content []byte) error {
	tmp := filepath.Join(dir, name+tmpSuffix)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("segment: writing %s: %w", name, err)
	}
	_, err = f.Write(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("segment: writing %s: %w", name, err)
	}
	return nil
}

// syncDir flushes a directory's entries: files created, renamed or
// removed in it.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("segment: syncing directory %s: %w", dir, err)
	}
	return nil
}
