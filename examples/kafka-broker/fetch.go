package main

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
)

// fetch answers Fetch, always as a full fetch: the response's session ID
// is 0, which tells a client that asked for a fetch session that it has
// none (clients then send every partition each time). The wait for
// MinBytes up to MaxWait is the facade's long poll, which commits wake;
// the last stable offset is the high watermark (no transactions).
func (s *server) fetch(ctx context.Context, req *kmsg.FetchRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	var parts []diskless.FetchPartition
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			parts = append(parts, diskless.FetchPartition{Topic: rt.Topic, Partition: rp.Partition, Offset: rp.FetchOffset, MaxBytes: rp.PartitionMaxBytes})
		}
	}
	maxBytes := req.MaxBytes
	if req.Version < 3 || maxBytes <= 0 {
		maxBytes = 1<<31 - 1
	}
	out, err := s.b.Fetch(ctx, diskless.FetchRequest{
		Partitions: parts, MaxBytes: maxBytes,
		MinBytes: req.MinBytes, MaxWait: time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	i := 0
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for range rt.Partitions {
			r := out.Partitions[i]
			i++
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.ErrorCode = r.Partition, int16(r.ErrorCode)
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = r.HighWatermark, r.HighWatermark, r.LogStartOffset
			p.RecordBatches = r.Records
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// listOffsets answers ListOffsets: -2 is the log start offset, -1 the high
// watermark (also the last stable offset: no transactions), -3 (version 7)
// the record with the greatest timestamp, and a timestamp the first record
// at or after it (offset -1 when there is none).
func (s *server) listOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition, p.Offset, p.Timestamp, p.LeaderEpoch = rp.Partition, -1, -1, -1
			switch {
			case rp.Timestamp == diskless.MaxTimestamp && req.Version < 7:
				p.ErrorCode = kerr.UnsupportedVersion.Code
			case rp.Timestamp < diskless.MaxTimestamp:
				p.ErrorCode = kerr.InvalidRequest.Code
			default:
				r, err := s.b.ListOffsets(ctx, rt.Topic, rp.Partition, rp.Timestamp)
				if err != nil {
					p.ErrorCode = codeOf(err)
					break
				}
				p.Offset, p.Timestamp = r.Offset, r.Timestamp
				if r.Offset >= 0 {
					p.LeaderEpoch = 0
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// deleteRecords answers DeleteRecords: each partition's log start offset
// moves up to the offset asked (-1: the high watermark).
func (s *server) deleteRecords(ctx context.Context, req *kmsg.DeleteRecordsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewDeleteRecordsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewDeleteRecordsResponseTopicPartition()
			p.Partition, p.LowWatermark = rp.Partition, -1
			if isInternal(rt.Topic) {
				p.ErrorCode = kerr.InvalidTopicException.Code
			} else if low, err := s.b.DeleteRecords(ctx, rt.Topic, rp.Partition, rp.Offset); err != nil {
				p.ErrorCode = codeOf(err)
			} else {
				p.LowWatermark = low
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
