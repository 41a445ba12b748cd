package etcdcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/diskless-go/diskless/cluster/internal/featurelevels"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/kafkaerr"
)

// Finalized feature levels in etcd.
//
// Each finalized feature is a key <prefix>features/<name> holding its
// level in decimal; the highest mod revision of those keys is the
// levels' epoch. A level is raised by a transaction that also checks
// that no member key changed since the members were read (a compare of
// every key under <prefix>members/ at once), so a broker that registered
// meanwhile, perhaps without support for the new level, fails it, and it
// is tried again on the new membership. A broker that joins reads the
// levels after it has registered: either the transaction saw its
// registration, or the broker sees the new levels and, if it does not
// support them, leaves. Both orders are safe.
//
// The first broker to join a cluster with no finalized levels finalizes
// each feature it supports at the lowest level the live members support
// (1 for members of a release before features, which advertise none):
// a new cluster starts at this release's levels, one upgraded from a
// release before features at level 1.

func (n *Node) featuresDir() string { return n.conn.prefix + "features/" }

func (n *Node) applyFeature(key string, val []byte, _, modRev int64, del bool) {
	name := strings.TrimPrefix(key, n.featuresDir())
	n.mu.Lock()
	defer n.mu.Unlock()
	f := &n.mu.features
	if del {
		delete(f.Levels, name)
		return
	}
	level, err := strconv.Atoi(string(val))
	if err != nil || level < 1 {
		n.log.Warn("cluster: a finalized feature level that does not parse", zap.String("key", key), zap.ByteString("value", val))
		return
	}
	f.Levels[name] = level
	f.Epoch = max(f.Epoch, modRev)
}

// Features implements cluster.Node.
func (n *Node) Features() cluster.FinalizedFeatures {
	n.mu.Lock()
	defer n.mu.Unlock()
	return cluster.FinalizedFeatures{Levels: maps.Clone(n.mu.features.Levels), Epoch: n.mu.features.Epoch}
}

// finalized reads the finalized levels, with each key's mod revision
// (0: not finalized), and the members, at one revision.
func (n *Node) finalized(ctx context.Context) (levels map[string]int, mods map[string]int64, members []cluster.Member, rev int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := n.client.Txn(ctx).Then(
		clientv3.OpGet(n.featuresDir(), clientv3.WithPrefix()),
		clientv3.OpGet(n.membersDir(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, nil, nil, 0, fmt.Errorf("etcdcluster: reading the finalized features: %w", err)
	}
	levels, mods = map[string]int{}, map[string]int64{}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		name := strings.TrimPrefix(string(kv.Key), n.featuresDir())
		if l, err := strconv.Atoi(string(kv.Value)); err == nil {
			levels[name], mods[name] = l, kv.ModRevision
		}
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		var m cluster.Member
		if json.Unmarshal(kv.Value, &m) == nil {
			members = append(members, m)
		}
	}
	return levels, mods, members, resp.Header.Revision, nil
}

// commitLevels writes levels if no member key changed after rev and
// each feature's key is still at mods' revision; false if one was.
func (n *Node) commitLevels(ctx context.Context, levels map[string]int, mods map[string]int64, rev int64) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(n.membersDir()), "<", rev+1).WithPrefix()}
	var puts []clientv3.Op
	for _, name := range slices.Sorted(maps.Keys(levels)) {
		key := n.featuresDir() + name
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", mods[name]))
		puts = append(puts, clientv3.OpPut(key, strconv.Itoa(levels[name])))
	}
	resp, err := n.client.Txn(ctx).If(cmps...).Then(puts...).Commit()
	if err != nil {
		return false, fmt.Errorf("etcdcluster: writing the finalized features: %w", err)
	}
	return resp.Succeeded, nil
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
			ok, err := n.commitLevels(ctx, boot, mods, rev)
			if err != nil {
				return err
			}
			if !ok && attempt < 10 {
				continue // a member joined, or another broker finalized first
			}
			if ok {
				n.log.Info("cluster: finalized the features", zap.Any("levels", boot))
				levels = boot
			}
		}
		if err := featurelevels.CheckJoin("etcdcluster", n.opts.Member, levels); err != nil {
			return err
		}
		n.mu.Lock()
		for name, l := range levels {
			n.mu.features.Levels[name] = l
			n.mu.features.Epoch = max(n.mu.features.Epoch, mods[name])
		}
		n.mu.Unlock()
		return nil
	}
}

// UpdateFeatures implements cluster.Node.
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
		ok, err := n.commitLevels(ctx, want, mods, rev)
		if err != nil {
			return &kafkaerr.Error{Code: kafkaerr.FeatureUpdateFailed, Message: err.Error(), Err: err}
		}
		if ok {
			n.log.Info("cluster: raised the finalized features", zap.Any("levels", want))
			n.mu.Lock()
			for name, l := range want {
				n.mu.features.Levels[name] = l
			}
			n.mu.Unlock()
			return nil
		}
	}
	return kafkaerr.New(kafkaerr.FeatureUpdateFailed, "the cluster's membership kept changing while the features were updated: try again")
}
