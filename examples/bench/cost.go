package main

import "strings"

// The cost model of docs/architecture.md, "The cost model", at the ingress a run measured,
// for a 30-day month. Its assumptions, printed in the report:
const (
	secondsPerMonth = 30 * 24 * 3600
	retentionDays   = 7       // retention.ms
	replication     = 3       // classic replication factor R
	zones           = 3       // availability zones Z
	consumerGroups  = 1       // G: one group reads everything once
	rackAffinity    = 0.0     // A: consumers without rack affinity
	crossZonePerGiB = 0.02    // USD per GiB crossing zones
	blockPerGB      = 0.08    // USD per GB-month of block storage
	blockHeadroom   = 1.4     // free space kept on broker disks
	coldShare       = 0.2     // share of consumer reads that miss the caches
	getBytes        = 4 << 20 // bytes per ranged GET of a cold read
	metadataShare   = 0.005   // metadata log, replicated classically, as a share of ingress
)

// storePrices are an object store's prices in USD (us-east-1).
type storePrices struct {
	PerGBMonth             float64 // storage
	PutPer1000, GetPer1000 float64
	// UploadPerGB and DownloadPerGB are S3 Express One Zone's charges for
	// the bytes of requests (the AWS S3 FAQ's pricing examples charge
	// every byte, as this does).
	UploadPerGB, DownloadPerGB float64
}

// s3Standard and s3Express are the prices of the profiles' stores: S3
// Standard, and S3 Express One Zone after the April 2025 reduction (AWS S3
// FAQ: 0.11 USD per GB-month, PUT 0.00113 and GET 0.00003 per 1,000,
// 0.0032 per GB uploaded and 0.0006 per GB retrieved).
var (
	s3Standard = storePrices{PerGBMonth: 0.023, PutPer1000: 0.005, GetPer1000: 0.0004}
	s3Express  = storePrices{PerGBMonth: 0.11, PutPer1000: 0.00113, GetPer1000: 0.00003, UploadPerGB: 0.0032, DownloadPerGB: 0.0006}
)

// pricesOf returns the prices of the store a profile stands for (S3
// Standard unless it is s3-express).
func pricesOf(profile string) storePrices {
	if strings.HasPrefix(profile, "s3-express") {
		return s3Express
	}
	return s3Standard
}

// cost is a monthly bill in USD, by item.
type cost struct {
	// Classic.
	Replication   float64 `json:"replication,omitempty"`
	ProducerXZone float64 `json:"producer_cross_zone,omitempty"`
	ConsumerXZone float64 `json:"consumer_cross_zone,omitempty"`
	BlockStorage  float64 `json:"block_storage,omitempty"`
	// Diskless.
	Puts          float64 `json:"puts,omitempty"`
	Gets          float64 `json:"gets,omitempty"`
	ObjectStorage float64 `json:"object_storage,omitempty"`
	MetadataLog   float64 `json:"metadata_log,omitempty"`
	// CompressionRatio is bytes stored over bytes produced (diskless: the
	// WAL bytes PUT over the message bytes).
	CompressionRatio float64 `json:"compression_ratio"`
}

func (c cost) total() float64 {
	return c.Replication + c.ProducerXZone + c.ConsumerXZone + c.BlockStorage + c.Puts + c.Gets + c.ObjectStorage + c.MetadataLog
}

// cost prices the run's measured ingress for a month.
func (r *result) cost() {
	rate := r.MBPerS * 1e6 // bytes per second
	ingressGiB := rate * secondsPerMonth / (1 << 30)
	retainedGB := rate * retentionDays * 24 * 3600 / 1e9
	xz := 1 - 1.0/zones
	var c cost
	c.CompressionRatio = 1
	switch r.Mode {
	case "classic":
		c.Replication = ingressGiB * (replication - 1) * crossZonePerGiB
		c.ProducerXZone = ingressGiB * xz * crossZonePerGiB
		c.ConsumerXZone = ingressGiB * consumerGroups * (1 - rackAffinity) * xz * crossZonePerGiB
		c.BlockStorage = retainedGB * replication * blockHeadroom * blockPerGB
	case "diskless":
		if r.Msgs > 0 && r.WALPuts > 0 && r.MBPerS > 0 {
			c.CompressionRatio = r.ObjectMB * r.ObjectsPerS / r.MBPerS
		}
		secs := r.DurationS
		wal, meta := pricesOf(r.Profile), pricesOf(r.Profile)
		if r.MetadataProfile != "" {
			meta = pricesOf(r.MetadataProfile)
		}
		perMonth := func(n int64) float64 { return float64(n) / secs * secondsPerMonth / 1000 }
		// Hedges are PUTs of the WAL bucket, in r.Puts.
		c.Puts = perMonth(r.Puts-r.MetaBucketPuts)*wal.PutPer1000 + perMonth(r.MetaBucketPuts)*meta.PutPer1000
		c.Puts += ingressGiB * c.CompressionRatio * wal.UploadPerGB
		coldGets := rate * consumerGroups * coldShare / getBytes * secondsPerMonth
		c.Gets = (coldGets + float64(r.Gets)/secs*secondsPerMonth) * wal.GetPer1000 / 1000
		c.Gets += ingressGiB * consumerGroups * coldShare * wal.DownloadPerGB
		c.ObjectStorage = retainedGB * c.CompressionRatio * wal.PerGBMonth
		if r.Metadata == "memory" {
			// Not in the bucket: a classically replicated log.
			c.MetadataLog = ingressGiB * metadataShare * (replication - 1) * crossZonePerGiB
		}
	}
	r.Cost, r.USDPerMonth = c, c.total()
}
