// Package featurelevels holds the rules of feature levels that every
// cluster.Backend applies alike (etcdcluster and memcluster): the levels
// a new cluster finalizes, whether a broker may join at the finalized
// levels, and whether an update may raise them. Each Backend keeps the
// levels in its own store; the rules are one.
package featurelevels

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/kafkaerr"
)

// Bootstrap returns the levels a cluster that has none finalizes when
// self joins: each feature self names, at the lowest level a live member
// supports. A feature a live member's release does not name (it names
// features, but not this one) is left unfinalized (level 1), which that
// release does not refuse.
func Bootstrap(self cluster.Member, members []cluster.Member) map[string]int {
	boot := map[string]int{}
	for name, l := range self.Features {
		for _, m := range members {
			l = min(l, m.Supports(name))
		}
		if l > 0 {
			boot[name] = l
		}
	}
	return boot
}

// CheckJoin refuses self (INVALID_UPDATE_VERSION) if it does not support
// a finalized level; who names the Backend in the message.
func CheckJoin(who string, self cluster.Member, levels map[string]int) error {
	for _, name := range slices.Sorted(maps.Keys(levels)) {
		if have, l := self.Supports(name), levels[name]; have < l {
			return &kafkaerr.Error{Code: kafkaerr.InvalidUpdateVersion, Message: fmt.Sprintf(
				"%s: the cluster's feature %s is finalized at level %d and this broker supports up to %d: run a release that supports it", who, name, l, have)}
		}
	}
	return nil
}

// CheckUpdate refuses (INVALID_UPDATE_VERSION) raising the finalized
// levels to want: a feature neither finalized nor known to self, a level
// below the finalized one (never lowered), or one a live member does not
// support.
func CheckUpdate(self cluster.Member, want, levels map[string]int, members []cluster.Member) error {
	for _, name := range slices.Sorted(maps.Keys(want)) {
		l := want[name]
		cur, finalized := levels[name]
		if _, ok := self.Features[name]; !ok && !finalized {
			return kafkaerr.New(kafkaerr.InvalidUpdateVersion, "no feature %q", name)
		}
		if l < cur {
			return kafkaerr.New(kafkaerr.InvalidUpdateVersion, "feature %s is finalized at level %d: it is never lowered (%d asked)", name, cur, l)
		}
		var lacking []string
		for _, m := range members {
			if m.Supports(name) < l {
				lacking = append(lacking, fmt.Sprintf("%d (up to %d)", m.ID, m.Supports(name)))
			}
		}
		if lacking != nil {
			return kafkaerr.New(kafkaerr.InvalidUpdateVersion, "feature %s level %d is not supported by broker %s: upgrade them first", name, l, strings.Join(lacking, ", "))
		}
	}
	return nil
}
