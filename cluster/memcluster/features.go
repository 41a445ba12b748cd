package memcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/diskless-go/diskless/cluster/internal/featurelevels"

	"go.uber.org/zap"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/kafkaerr"
)

// Finalized feature levels, as etcdcluster keeps them (see its
// features.go): each finalized feature is a key <prefix>features/<name>
// holding its level in decimal; the highest mod revision of those keys
// is the levels' epoch. A level is raised by a transaction that also
// checks that no member key changed since the members were read, so a
// broker that registered meanwhile fails it and it is tried again; a
// broker that joins reads the levels after it has registered, and leaves
// if it does not support them. The first broker to join a cluster with
// no finalized levels finalizes each feature it supports at the lowest
// level the live members support.

func (n *Node) featuresDir() string { return n.conn.prefix + "features/" }

func (n *Node) applyFeature(e event) {
	name := strings.TrimPrefix(e.key, n.featuresDir())
	n.mu.Lock()
	defer n.mu.Unlock()
	f := &n.mu.features
	if e.mod <= n.mu.featureMods[name] {
		return // older than what this Node wrote or read: a watch behind
	}
	n.mu.featureMods[name] = e.mod
	if e.del {
		delete(f.Levels, name)
		return
	}
	level, err := strconv.Atoi(string(e.val))
	if err != nil || level < 1 {
		n.log.Warn("cluster: a finalized feature level that does not parse", zap.String("key", e.key), zap.ByteString("value", e.val))
		return
	}
	f.Levels[name] = level
	f.Epoch = max(f.Epoch, e.mod)
}

// setLevelLocked sets a finalized level this Node read or wrote at
// revision mod in its view, unless its watch has shown it a later one.
func (n *Node) setLevelLocked(name string, level int, mod int64) {
	if mod < n.mu.featureMods[name] {
		return
	}
	n.mu.featureMods[name] = mod
	n.mu.features.Levels[name] = level
	n.mu.features.Epoch = max(n.mu.features.Epoch, mod)
}

// Features implements cluster.Node: the levels as this Node's watch has
// shown them.
func (n *Node) Features() cluster.FinalizedFeatures {
	n.mu.Lock()
	defer n.mu.Unlock()
	return cluster.FinalizedFeatures{Levels: maps.Clone(n.mu.features.Levels), Epoch: n.mu.features.Epoch}
}

// finalized reads the finalized levels, with each key's mod revision,
// and the members, at one revision.
func (n *Node) finalized(ctx context.Context) (levels map[string]int, mods map[string]int64, members []cluster.Member, rev int64, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, 0, err
	}
	s := n.svc
	levels, mods = map[string]int{}, map[string]int64{}
	err = s.op(n.opts.Member.ID, func() error {
		for _, k := range s.rangeLocked(n.featuresDir()) {
			v := s.mu.keys[k]
			if l, err := strconv.Atoi(string(v.val)); err == nil {
				name := strings.TrimPrefix(k, n.featuresDir())
				levels[name], mods[name] = l, v.mod
			}
		}
		for _, k := range s.rangeLocked(n.membersDir()) {
			var m cluster.Member
			if json.Unmarshal(s.mu.keys[k].val, &m) == nil {
				members = append(members, m)
			}
		}
		rev = s.mu.rev
		return nil
	})
	if err != nil {
		return nil, nil, nil, 0, fmt.Errorf("memcluster: reading the finalized features: %w", err)
	}
	return levels, mods, members, rev, nil
}

// commitLevels writes levels, at one revision, if no member key changed
// after rev and each feature's key is still at mods' revision (0: not
// there); false if one was. It returns the revision written at.
func (n *Node) commitLevels(ctx context.Context, levels map[string]int, mods map[string]int64, rev int64) (int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	s := n.svc
	ok := false
	var at int64
	err := s.op(n.opts.Member.ID, func() error {
		for _, k := range s.rangeLocked(n.membersDir()) {
			if s.mu.keys[k].mod > rev {
				return nil
			}
		}
		for name := range levels {
			var mod int64
			if v, there := s.mu.keys[n.featuresDir()+name]; there {
				mod = v.mod
			}
			if mod != mods[name] {
				return nil
			}
		}
		s.mu.rev++
		for _, name := range slices.Sorted(maps.Keys(levels)) {
			s.putLocked(n.featuresDir()+name, []byte(strconv.Itoa(levels[name])), s.mu.rev, 0)
		}
		ok, at = true, s.mu.rev
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("memcluster: writing the finalized features: %w", err)
	}
	return at, ok, nil
}

// joinFeatures finalizes the features of a cluster that has none, and
// refuses this broker if it does not support a finalized level.
func (n *Node) joinFeatures(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		levels, mods, members, rev, err := n.finalized(ctx)
		if err != nil {
			return err
		}
		if len(levels) == 0 && len(n.opts.Member.Features) > 0 {
			boot := featurelevels.Bootstrap(n.opts.Member, members)
			at, ok, err := n.commitLevels(ctx, boot, mods, rev)
			if err != nil {
				return err
			}
			if !ok && attempt < 10 {
				continue // a member joined, or another broker finalized first
			}
			if ok {
				n.log.Info("cluster: finalized the features", zap.Any("levels", boot))
				levels = boot
				for name := range boot {
					mods[name] = at
				}
			}
		}
		if err := featurelevels.CheckJoin("memcluster", n.opts.Member, levels); err != nil {
			return err
		}
		n.mu.Lock()
		for name, l := range levels {
			n.setLevelLocked(name, l, mods[name])
		}
		n.mu.Unlock()
		return nil
	}
}

// UpdateFeatures implements cluster.Node, as etcdcluster's does: each
// level is checked against the live members (as registered, not as this
// Node's watch shows them), and all are written in one transaction that
// fails, and is tried again, if the membership changed meanwhile.
func (n *Node) UpdateFeatures(ctx context.Context, want map[string]int, validateOnly bool) error {
	for attempt := 0; attempt < 10; attempt++ {
		levels, mods, members, rev, err := n.finalized(ctx)
		if err != nil {
			return &kafkaerr.Error{Code: kafkaerr.FeatureUpdateFailed, Message: err.Error(), Err: err}
		}
		if err := featurelevels.CheckUpdate(n.opts.Member, want, levels, members); err != nil {
			return err
		}
		if validateOnly {
			return nil
		}
		at, ok, err := n.commitLevels(ctx, want, mods, rev)
		if err != nil {
			return &kafkaerr.Error{Code: kafkaerr.FeatureUpdateFailed, Message: err.Error(), Err: err}
		}
		if ok {
			n.log.Info("cluster: raised the finalized features", zap.Any("levels", want))
			n.mu.Lock()
			for name, l := range want {
				n.setLevelLocked(name, l, at)
			}
			n.mu.Unlock()
			return nil
		}
	}
	return kafkaerr.New(kafkaerr.FeatureUpdateFailed, "the cluster's membership kept changing while the features were updated: try again")
}
