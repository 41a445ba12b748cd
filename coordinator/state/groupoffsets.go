package state

import (
	"encoding/binary"
	"hash/fnv"
	"slices"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/google/uuid"
)

// GroupOffset is one partition's committed offset of a consumer group.
type GroupOffset struct {
	// Topic and Partition name the partition; TopicID is the ID of the
	// topic the offset was committed for (the zero UUID if unknown).
	Topic     string
	TopicID   uuid.UUID
	Partition int32
	// Offset is the committed offset: the next record the group reads.
	Offset int64
	// LeaderEpoch is the leader epoch of the record before Offset, -1 if
	// unknown.
	LeaderEpoch int32
	// Metadata is the client's string for the commit.
	Metadata string
	// CommitTime is when the coordinator committed it, in Unix
	// milliseconds; CommitOffsets ignores it.
	CommitTime int64
}

// GroupPartition names a partition in a group's committed offsets.
type GroupPartition struct {
	Topic     string
	Partition int32
}

// MaxGroupOffsetMetadata bounds GroupOffset.Metadata, as Kafka's default
// offset.metadata.max.bytes does.
const MaxGroupOffsetMetadata = 4096

// OffsetCommitRecord commits offsets of a group (CommitOffsets): applying
// it stores each, replacing what the group had for the partition.
type OffsetCommitRecord struct {
	Group   string
	Time    int64
	Offsets []GroupOffset // CommitTime is Time (not encoded)
}

// OffsetDeleteRecord deletes a group's committed offsets (DeleteOffsets):
// those of Partitions, or every one when Partitions is nil.
type OffsetDeleteRecord struct {
	Group      string
	Partitions []GroupPartition
}

// GroupClaimRecord raises a group's claim epoch to Epoch (ClaimGroup).
type GroupClaimRecord struct {
	Group string
	Epoch int64
}

func (OffsetCommitRecord) Kind() recordType { return recOffsetCommit }

func (OffsetDeleteRecord) Kind() recordType { return recOffsetDelete }

func (GroupClaimRecord) Kind() recordType { return recGroupClaim }

func (GroupMetadataRecord) Kind() recordType { return recGroupMetadata }

// GroupMetadataRecord stores a group's metadata (PutGroupMetadata): Value,
// of Generation, replacing what the group had unless that is of a later
// generation; an empty Value deletes it, whatever its generation.
type GroupMetadataRecord struct {
	Group      string
	Generation int64
	Value      []byte
	Time       int64
}

func (r GroupMetadataRecord) AppendTo(b []byte) []byte {
	b = AppendString(b, r.Group)
	b = binary.AppendVarint(b, r.Generation)
	b = binary.AppendUvarint(b, uint64(len(r.Value)))
	b = append(b, r.Value...)
	return binary.AppendVarint(b, r.Time)
}

func (d *Decoder) groupMetadata() GroupMetadataRecord {
	r := GroupMetadataRecord{Group: d.string(), Generation: d.Varint()}
	if v := d.bytes(); len(v) > 0 {
		r.Value = slices.Clone(v)
	}
	r.Time = d.Varint()
	return r
}

func (r GroupClaimRecord) AppendTo(b []byte) []byte {
	b = AppendString(b, r.Group)
	return binary.AppendVarint(b, r.Epoch)
}

func (d *Decoder) groupClaim() GroupClaimRecord {
	r := GroupClaimRecord{Group: d.string(), Epoch: d.Varint()}
	if r.Epoch < 1 && d.Err == nil {
		d.Fail("a group claim of epoch %d", r.Epoch)
	}
	return r
}

func (r OffsetCommitRecord) AppendTo(b []byte) []byte {
	b = AppendString(b, r.Group)
	b = binary.AppendVarint(b, r.Time)
	b = binary.AppendUvarint(b, uint64(len(r.Offsets)))
	for _, o := range r.Offsets {
		b = appendGroupOffset(b, o)
	}
	return b
}

// appendGroupOffset appends an offset as records hold it: topic, topic
// ID, partition, offset, leader epoch, metadata (its commit time is the
// record's).
func appendGroupOffset(b []byte, o GroupOffset) []byte {
	b = AppendString(b, o.Topic)
	b = append(b, o.TopicID[:]...)
	b = binary.AppendVarint(b, int64(o.Partition))
	b = binary.AppendVarint(b, o.Offset)
	b = binary.AppendVarint(b, int64(o.LeaderEpoch))
	return AppendString(b, o.Metadata)
}

// groupOffset decodes what appendGroupOffset appended.
func (d *Decoder) groupOffset() GroupOffset {
	return GroupOffset{Topic: d.string(), TopicID: d.uuid(), Partition: d.Int32(), Offset: d.Varint(), LeaderEpoch: d.Int32(), Metadata: d.string()}
}

func (r OffsetDeleteRecord) AppendTo(b []byte) []byte {
	b = AppendString(b, r.Group)
	b = binary.AppendUvarint(b, uint64(len(r.Partitions)))
	for _, p := range r.Partitions {
		b = AppendString(b, p.Topic)
		b = binary.AppendVarint(b, int64(p.Partition))
	}
	return b
}

func (d *Decoder) offsetCommit() OffsetCommitRecord {
	r := OffsetCommitRecord{Group: d.string(), Time: d.Varint()}
	// An offset takes at least 21 bytes: topic length, ID, partition,
	// offset, epoch, metadata length.
	n := d.Count(21)
	if n == 0 && d.Err == nil {
		d.Fail("an offset commit of no offsets")
	}
	if n > 0 {
		r.Offsets = make([]GroupOffset, n)
	}
	for i := range r.Offsets {
		r.Offsets[i] = d.groupOffset()
		r.Offsets[i].CommitTime = r.Time
	}
	return r
}

func (d *Decoder) offsetDelete() OffsetDeleteRecord {
	r := OffsetDeleteRecord{Group: d.string()}
	n := d.Count(2)
	if n > 0 {
		r.Partitions = make([]GroupPartition, n)
	}
	for i := range r.Partitions {
		r.Partitions[i] = GroupPartition{Topic: d.string(), Partition: d.Int32()}
	}
	return r
}

// ShardOfGroup returns the shard that holds a group's committed offsets
// among n: the FNV-1a hash of the name, modulo n. Part of the format.
func ShardOfGroup(group string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(group))
	return int(h.Sum32() % uint32(n))
}

// checkGroupWrite refuses a write to a group without a name
// (INVALID_GROUP_ID) or, with NOT_COORDINATOR, under a claim older than
// the group's latest; claim 0 is none, and passes.
func checkGroupWrite(g *Group, group string, claim int64) error {
	if err := CheckGroupName(group); err != nil {
		return err
	}
	if claim == 0 {
		return nil
	}
	if cur := g.Spec.claim(group); claim < cur {
		return kafkaerr.New(kafkaerr.NotCoordinator, "group %q was claimed again (epoch %d) since this claim (epoch %d)", group, cur, claim)
	}
	return nil
}

// CheckGroupName refuses an empty group name, as Kafka does.
func CheckGroupName(group string) error {
	if group == "" {
		return kafkaerr.New(kafkaerr.InvalidGroupID, "a group needs a name")
	}
	return nil
}

type CommitOffsetsOp struct {
	BaseOp
	Group   string
	Claim   int64
	Offsets []GroupOffset
}

func (o *CommitOffsetsOp) Coords() int { return max(len(o.Offsets), 1) }

func (o *CommitOffsetsOp) Check(g *Group) {
	if err := checkGroupWrite(g, o.Group, o.Claim); err != nil {
		o.Finish(err)
		return
	}
	if len(o.Offsets) == 0 {
		o.Finish(nil)
		return
	}
	seen := make(map[GroupPartition]bool, len(o.Offsets))
	for _, c := range o.Offsets {
		p := GroupPartition{c.Topic, c.Partition}
		switch {
		case !legalTopicName.MatchString(c.Topic) || c.Topic == "." || c.Topic == "..":
			o.Finish(kafkaerr.New(kafkaerr.InvalidTopicException, "topic name %q is not legal", c.Topic))
			return
		case c.Partition < 0:
			o.Finish(kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "partition %d of %s", c.Partition, c.Topic))
			return
		case len(c.Metadata) > MaxGroupOffsetMetadata:
			o.Finish(kafkaerr.New(kafkaerr.OffsetMetadataTooLarge, "metadata of %d bytes for %s-%d; at most %d", len(c.Metadata), c.Topic, c.Partition, MaxGroupOffsetMetadata))
			return
		case seen[p]:
			o.Finish(kafkaerr.New(kafkaerr.InvalidRequest, "%s-%d twice in one commit", c.Topic, c.Partition))
			return
		}
		seen[p] = true
	}
	r := OffsetCommitRecord{Group: o.Group, Time: g.Now, Offsets: make([]GroupOffset, len(o.Offsets))}
	for i, c := range o.Offsets {
		c.CommitTime = g.Now
		r.Offsets[i] = c
	}
	g.add(r)
}

type DeleteOffsetsOp struct {
	BaseOp
	Group string
	Claim int64
	Parts []GroupPartition
}

func (o *DeleteOffsetsOp) Check(g *Group) {
	if err := checkGroupWrite(g, o.Group, o.Claim); err != nil {
		o.Finish(err)
		return
	}
	if o.Parts != nil && len(o.Parts) == 0 {
		o.Finish(nil)
		return
	}
	r := OffsetDeleteRecord{Group: o.Group}
	for _, p := range o.Parts {
		if !slices.Contains(r.Partitions, p) {
			r.Partitions = append(r.Partitions, p)
		}
	}
	g.add(r)
}

type ClaimGroupOp struct {
	BaseOp
	Group string
	Epoch int64
}

func (o *ClaimGroupOp) Check(g *Group) {
	if err := CheckGroupName(o.Group); err != nil {
		o.Finish(err)
		return
	}
	o.Epoch = g.Spec.claim(o.Group) + 1
	g.add(GroupClaimRecord{Group: o.Group, Epoch: o.Epoch})
}

// MaxGroupMetadata bounds a group's metadata value (PutGroupMetadata).
const MaxGroupMetadata = 1 << 20

type PutGroupMetadataOp struct {
	BaseOp
	Group      string
	Claim      int64
	Generation int64
	Value      []byte
}

func (o *PutGroupMetadataOp) Check(g *Group) {
	if err := checkGroupWrite(g, o.Group, o.Claim); err != nil {
		o.Finish(err)
		return
	}
	if len(o.Value) > MaxGroupMetadata {
		o.Finish(kafkaerr.New(kafkaerr.RecordListTooLarge, "group metadata of %d bytes; at most %d", len(o.Value), MaxGroupMetadata))
		return
	}
	g.add(GroupMetadataRecord{Group: o.Group, Generation: o.Generation, Value: o.Value, Time: g.Now})
}
