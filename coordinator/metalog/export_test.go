package metalog

// FailNextFileWrite makes the next write of l fail: it closes the segment
// file the syncer writes. No append of l may be pending.
func FailNextFileWrite(l *File) { l.cur.Close() }

// FileMaxUnsynced is fileLogMaxUnsynced, for the external tests.
const FileMaxUnsynced = fileLogMaxUnsynced

// ParseFileSegmentName is parseFileLogSegmentName, for the external tests.
var ParseFileSegmentName = parseFileLogSegmentName
