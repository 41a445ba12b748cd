package featurelevels

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/kafkaerr"
)

// TestRules: a new cluster finalizes each feature at the lowest level a
// live member supports, leaving unfinalized one that a member naming
// features does not name; a broker below a finalized level may not join;
// an update may not lower a level, name an unknown feature, or pass a
// member's support.
func TestRules(t *testing.T) {
	self := cluster.Member{ID: 1, Features: map[string]int{"a": 3, "b": 2}}
	older := cluster.Member{ID: 2}                                     // before features: level 1 of each
	partial := cluster.Member{ID: 3, Features: map[string]int{"a": 2}} // names features, not b
	require.Equal(t, map[string]int{"a": 1, "b": 1}, Bootstrap(self, []cluster.Member{self, older}))
	require.Equal(t, map[string]int{"a": 2}, Bootstrap(self, []cluster.Member{self, partial}))

	require.NoError(t, CheckJoin("x", self, map[string]int{"a": 3}))
	require.Equal(t, kafkaerr.InvalidUpdateVersion, kafkaerr.CodeOf(CheckJoin("x", older, map[string]int{"a": 2})))

	members := []cluster.Member{self, partial}
	require.NoError(t, CheckUpdate(self, map[string]int{"a": 2}, map[string]int{"a": 1}, members))
	for _, want := range []map[string]int{{"a": 3}, {"a": 1}, {"c": 1}} {
		require.Equal(t, kafkaerr.InvalidUpdateVersion, kafkaerr.CodeOf(CheckUpdate(self, want, map[string]int{"a": 2}, members)), "%v", want)
	}
}
