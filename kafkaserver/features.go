package kafkaserver

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/kafkaerr"
)

// Feature levels (KIP-584): ApiVersions, from version 3, names the
// features this broker supports and the cluster's finalized levels
// (Broker.Features); UpdateFeatures raises a finalized level once every
// broker supports it (Broker.UpdateFeatures). Kafka's tools read and
// change them: kafka-features.sh describe and upgrade.

// addFeatures fills an ApiVersions response's features.
func (s *Server) addFeatures(resp *kmsg.ApiVersionsResponse) {
	if resp.Version < 3 || resp.ErrorCode != 0 || s.b == nil { // no Broker: a test's bare Server
		return
	}
	st := s.b.Features()
	for _, name := range slices.Sorted(maps.Keys(st.Supported)) {
		f := kmsg.NewApiVersionsResponseSupportedFeature()
		f.Name, f.MinVersion, f.MaxVersion = name, 1, int16(st.Supported[name])
		resp.SupportedFeatures = append(resp.SupportedFeatures, f)
	}
	resp.FinalizedFeaturesEpoch = st.Epoch
	for _, name := range slices.Sorted(maps.Keys(st.Finalized)) {
		f := kmsg.NewApiVersionsResponseFinalizedFeature()
		f.Name, f.MinVersionLevel, f.MaxVersionLevel = name, 1, int16(st.Finalized[name])
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, f)
	}
}

// updateFeatures answers UpdateFeatures: every update or none. A
// deletion or a downgrade (a level below 1, AllowDowngrade, an upgrade
// type other than upgrade) is refused with INVALID_UPDATE_VERSION, as a
// finalized level is never lowered here; so is a feature named twice.
// Version 2 answers with the top-level error alone, as Kafka does.
func (s *Server) updateFeatures(ctx context.Context, req *kmsg.UpdateFeaturesRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	answer := func(code kafkaerr.Code, msg string) kmsg.Response {
		resp.ErrorCode = int16(code)
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		if req.Version < 2 {
			for _, u := range req.FeatureUpdates {
				r := kmsg.NewUpdateFeaturesResponseResult()
				r.Feature, r.ErrorCode = u.Feature, int16(code)
				if msg != "" {
					r.ErrorMessage = kmsg.StringPtr(msg)
				}
				resp.Results = append(resp.Results, r)
			}
		}
		return resp
	}
	if !s.allowCluster(ctx, acl.OpAlter) {
		return answer(kafkaerr.ClusterAuthorizationFailed, "")
	}
	levels := map[string]int{}
	for _, u := range req.FeatureUpdates {
		downgrade := u.AllowDowngrade || (req.Version >= 1 && u.UpgradeType != 1)
		switch _, dup := levels[u.Feature]; {
		case dup:
			return answer(kafkaerr.InvalidRequest, "feature "+u.Feature+" is named twice")
		case u.MaxVersionLevel < 1 || downgrade:
			return answer(kafkaerr.InvalidUpdateVersion, "feature "+u.Feature+": a finalized level is never lowered or deleted here")
		}
		levels[u.Feature] = int(u.MaxVersionLevel)
	}
	if err := s.b.UpdateFeatures(ctx, levels, req.ValidateOnly); err != nil {
		return answer(kafkaerr.CodeOf(err), err.Error())
	}
	return answer(0, "")
}
