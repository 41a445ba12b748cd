package state

import (
	"strings"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/diskless-go/diskless/kafkaerr"
)

// The model of consumer groups: claims, committed offsets, metadata.

var (
	groupNames  = []string{"g1", "g2", "g3", ""}
	hugeValue   = make([]byte, MaxGroupMetadata+1)
	hugeMeta    = strings.Repeat("m", MaxGroupOffsetMetadata+1)
	offsetTopic = []string{"t0", "t1", "", "bad name"}
)

// drawClaim draws the claim a write is made under: none, the group's
// latest, an older one (NOT_COORDINATOR), or a newer one.
func (s *modelRun) drawClaim(t *rapid.T, group string) int64 {
	cur := s.m.claims[group]
	return rapid.SampledFrom([]int64{0, cur, cur - 1, cur + 1}).Draw(t, "claim")
}

// groupWriteErr is the error of a write to a group under a claim.
func (s *modelRun) groupWriteErr(group string, claim int64) kafkaerr.Code {
	switch {
	case group == "":
		return kafkaerr.InvalidGroupID
	case claim != 0 && claim < s.m.claims[group]:
		return kafkaerr.NotCoordinator
	}
	return kafkaerr.NoError
}

func legalTopic(name string) bool { return name != "" && name != "bad name" }

func (s *modelRun) groupActions(actions map[string]func(*rapid.T)) {
	m := s.m
	actions["claimGroup"] = func(t *rapid.T) {
		g := rapid.SampledFrom(groupNames).Draw(t, "group")
		o := &ClaimGroupOp{BaseOp: s.base(), Group: g}
		s.decide(o)
		if g == "" {
			require.Equal(t, kafkaerr.InvalidGroupID, errCode(<-o.Done))
			return
		}
		require.NoError(t, <-o.Done)
		require.Equal(t, m.claims[g]+1, o.Epoch, "a claim's epoch is the last one's next")
		m.claims[g] = o.Epoch
	}
	actions["commitOffsets"] = func(t *rapid.T) {
		g := rapid.SampledFrom(groupNames).Draw(t, "group")
		claim := s.drawClaim(t, g)
		var offs []GroupOffset
		for range rapid.IntRange(0, 3).Draw(t, "offsets") {
			o := GroupOffset{Topic: rapid.SampledFrom(offsetTopic).Draw(t, "topic"), Partition: rapid.Int32Range(-1, 2).Draw(t, "partition"),
				Offset: rapid.Int64Range(0, 100).Draw(t, "offset"), LeaderEpoch: rapid.Int32Range(-1, 3).Draw(t, "leaderEpoch"),
				Metadata: rapid.SampledFrom([]string{"", "m", hugeMeta}).Draw(t, "metadata")}
			if rapid.Bool().Draw(t, "topicID") {
				o.TopicID = uuid.New()
			}
			offs = append(offs, o)
		}
		o := &CommitOffsetsOp{BaseOp: s.base(), Group: g, Claim: claim, Offsets: offs}
		recs := s.decide(o)
		want := s.groupWriteErr(g, claim)
		seen := map[GroupPartition]bool{}
		for _, off := range offs {
			if want != kafkaerr.NoError {
				break
			}
			gp := GroupPartition{off.Topic, off.Partition}
			switch {
			case !legalTopic(off.Topic):
				want = kafkaerr.InvalidTopicException
			case off.Partition < 0:
				want = kafkaerr.UnknownTopicOrPartition
			case len(off.Metadata) > MaxGroupOffsetMetadata:
				want = kafkaerr.OffsetMetadataTooLarge
			case seen[gp]:
				want = kafkaerr.InvalidRequest
			}
			seen[gp] = true
		}
		require.Equal(t, want, errCode(<-o.Done), "commit offsets %+v", offs)
		if want != kafkaerr.NoError || len(offs) == 0 {
			require.Empty(t, recs)
			return
		}
		if m.offsets[g] == nil {
			m.offsets[g] = map[GroupPartition]GroupOffset{}
		}
		for _, off := range offs {
			off.CommitTime = m.now
			m.offsets[g][GroupPartition{off.Topic, off.Partition}] = off
		}
	}
	actions["deleteOffsets"] = func(t *rapid.T) {
		g := rapid.SampledFrom(groupNames).Draw(t, "group")
		claim := s.drawClaim(t, g)
		var parts []GroupPartition
		if rapid.IntRange(0, 2).Draw(t, "some") > 0 {
			parts = []GroupPartition{}
			for range rapid.IntRange(0, 3).Draw(t, "parts") {
				parts = append(parts, GroupPartition{rapid.SampledFrom(offsetTopic[:2]).Draw(t, "topic"), rapid.Int32Range(0, 2).Draw(t, "partition")})
			}
		}
		o := &DeleteOffsetsOp{BaseOp: s.base(), Group: g, Claim: claim, Parts: parts}
		recs := s.decide(o)
		want := s.groupWriteErr(g, claim)
		require.Equal(t, want, errCode(<-o.Done))
		if want != kafkaerr.NoError || (parts != nil && len(parts) == 0) {
			require.Empty(t, recs)
			return
		}
		if parts == nil {
			delete(m.offsets, g)
			return
		}
		for _, p := range parts {
			delete(m.offsets[g], p)
		}
	}
	actions["putGroupMetadata"] = func(t *rapid.T) {
		g := rapid.SampledFrom(groupNames).Draw(t, "group")
		claim := s.drawClaim(t, g)
		gen := rapid.Int64Range(0, 3).Draw(t, "generation")
		var value []byte
		switch rapid.IntRange(0, 20).Draw(t, "value") {
		case 0:
			value = hugeValue
		case 1, 2, 3, 4:
		default:
			value = []byte{byte(rapid.IntRange('a', 'e').Draw(t, "byte"))}
		}
		o := &PutGroupMetadataOp{BaseOp: s.base(), Group: g, Claim: claim, Generation: gen, Value: value}
		s.decide(o)
		want := s.groupWriteErr(g, claim)
		if want == kafkaerr.NoError && len(value) > MaxGroupMetadata {
			want = kafkaerr.RecordListTooLarge
		}
		require.Equal(t, want, errCode(<-o.Done))
		if want != kafkaerr.NoError {
			return
		}
		// The metadata of a later generation stays; an empty value
		// deletes whatever there is.
		switch cur, ok := m.meta[g]; {
		case len(value) == 0:
			delete(m.meta, g)
		case !ok || cur.gen <= gen:
			m.meta[g] = mMeta{gen: gen, value: value}
		}
	}
}
