package kafkaserver

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/internal/kafkatest"
	"github.com/diskless-go/diskless/kafkaerr"
)

// TestFeatures: ApiVersions names the features the broker supports and
// their finalized levels (a single broker finalizes what it supports);
// UpdateFeatures to those levels succeeds and changes nothing, a lower
// level, a deletion, a downgrade or an unknown feature is refused with
// INVALID_UPDATE_VERSION, in every version (version 2 at the top level
// alone).
func TestFeatures(t *testing.T) {
	_, addr := startServer(t, nil)
	cl := kafkatest.Client(t, addr)
	want := coordinator.Features(nil)[coordinator.FeatureDisklessVersion]

	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	resp, err := av.RequestWith(t.Context(), cl)
	require.NoError(t, err)
	// By name: diskless.version, then transaction.version (Kafka's name,
	// which clients read to choose transactions v2).
	require.Len(t, resp.SupportedFeatures, 2)
	require.Equal(t, coordinator.FeatureDisklessVersion, resp.SupportedFeatures[0].Name)
	require.Equal(t, int16(1), resp.SupportedFeatures[0].MinVersion)
	require.Equal(t, int16(want), resp.SupportedFeatures[0].MaxVersion)
	require.Equal(t, coordinator.FeatureTransactionVersion, resp.SupportedFeatures[1].Name)
	require.Equal(t, int16(coordinator.TxnV2Level), resp.SupportedFeatures[1].MaxVersion)
	require.Len(t, resp.FinalizedFeatures, 2)
	require.Equal(t, int16(want), resp.FinalizedFeatures[0].MaxVersionLevel)
	require.Equal(t, coordinator.FeatureTransactionVersion, resp.FinalizedFeatures[1].Name)
	require.Equal(t, int16(coordinator.TxnV2Level), resp.FinalizedFeatures[1].MaxVersionLevel, "a new cluster starts at the highest level")
	require.GreaterOrEqual(t, resp.FinalizedFeaturesEpoch, int64(0))

	update := func(version int16, level int16, upgradeType int8) *kmsg.UpdateFeaturesResponse {
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(57, version) // the client sends the highest version both sides speak
		cl := kafkatest.Client(t, addr, kgo.MaxVersions(vs))
		req := kmsg.NewPtrUpdateFeaturesRequest()
		req.Version = version
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = coordinator.FeatureDisklessVersion, level, upgradeType
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		resp, err := req.RequestWith(t.Context(), cl)
		require.NoError(t, err)
		require.Equal(t, version, resp.Version)
		return resp
	}
	for v := int16(0); v <= 2; v++ {
		ok := update(v, int16(want), 1)
		require.Zero(t, ok.ErrorCode, "version %d", v)
		for _, bad := range []struct {
			level int16
			typ   int8
		}{{int16(want) - 1, 1}, {0, 1}, {int16(want) + 1, 1}, {int16(want), 2}} {
			if v == 0 && bad.typ != 1 {
				continue // no upgrade type before version 1
			}
			r := update(v, bad.level, bad.typ)
			require.Equal(t, int16(kafkaerr.InvalidUpdateVersion), r.ErrorCode, "version %d, %+v", v, bad)
			if v < 2 {
				require.Len(t, r.Results, 1)
				require.Equal(t, int16(kafkaerr.InvalidUpdateVersion), r.Results[0].ErrorCode)
			} else {
				require.Empty(t, r.Results)
			}
		}
	}
}
