// Package store is the batch coordinator's SQLite database: the schema,
// the rows each record of package coordinator/state writes, the loads
// that rebuild a view, the facts a decision reads, the reads that answer
// FindBatches, ListOffsets and the rest, and the published in-memory
// snapshot that reads start from. The database is a cache of the metadata
// log: package coordinator rebuilds it from a snapshot and the log.
//
// # The database
//
// One writer connection (the loop's) and a read-only pool. The writer keeps
// one transaction open across entries and commits it every ApplyInterval
// (10 ms), or at once when a read waits for it (see Read your writes): a
// request is answered once its entry is durable and applied, ListOffsets
// and offset checks read a published in-memory state that is always
// current, and FindBatches' rows come from the read pool. The
// database is a cache the log rebuilds, so where the kernel tells its boot
// ID the writer does not fsync at all: SQLite stays consistent through a
// crash of the process, and a database last opened under another boot and
// not closed cleanly is deleted and rebuilt. Producer states and
// partitions (log start, diskless start, high watermark) of the small
// tables are mirrored in memory (the view), their byte counts in the store;
// the
// producers table is written behind, every 10,000 entries and before
// snapshots, and opening replays the log's commits after it. The schema is
// in schema.go; a run of contiguous batches of one partition in one object
// is one row of the batches table.
//
// # Writing behind the loop
//
// While a leader's loop runs with an ApplyInterval above 0, the writer's
// statements of the common entries (commits and the like) are queued, in
// order and with their values, and run by the applier, a goroutine of
// their own, so that SQLite's work and the loop's checks use two cores
// (applier.go says what runs behind, what waits for the queue, and how
// Gather's lookups stay exact meanwhile). Under load the applier merges
// a commit into the next one queued.
package store
