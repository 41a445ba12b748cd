package kafkaserver

import (
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaerr"
)

// A group moves between the two protocols with its members, as Kafka 4
// moves it (its group.consumer.migration.policy "bidirectional", the
// default), so that consumers can be upgraded to the consumer protocol
// one at a time, or rolled back:
//
//   - Upgrade. When a member of the consumer protocol joins
//     (ConsumerGroupHeartbeat at member epoch 0) a classic group of
//     protocol type "consumer" that has members, the group becomes a
//     consumer group: its epoch and assignment epoch are the generation,
//     and each classic member becomes a member at that epoch, of the
//     classic protocol (consumerclassic.go), whose subscription is the
//     one it joined with (of the group's protocol) and whose assignment
//     and target are the partitions its last assignment gave it. Requests
//     waiting at a barrier are answered REBALANCE_IN_PROGRESS: their
//     members join again, now into the consumer group. The new member's
//     join then moves the group epoch on, and the classic members are
//     reconciled to the new target through their joins. A classic group
//     of another protocol type (a Connect cluster's) is not converted:
//     GROUP_ID_NOT_FOUND, as in Kafka.
//   - Downgrade. When the last member of the consumer protocol leaves
//     (epoch -1), is removed by its session or rebalance timeout, or is
//     replaced by a classic member with its instance ID, and classic
//     members remain, the group becomes a classic group again: stable, at
//     a generation that is the group epoch, each member with its session
//     and rebalance timeouts, its protocols and, as its assignment, its
//     target assignment; the protocol is chosen as a join barrier would,
//     the first member is the leader, and a rebalance starts at once
//     (unless a classic member replaced the last one), so that the
//     members join again and their leader assigns.
//
// On a cluster node the converted group is stored, in its new form, as
// any change of it is (consumerstore.go, groupstore.go).

// upgradeLocked makes the classic group cl, which has members, a consumer
// group (see above), of topics now, and returns it. Called with gs.mu
// held.
func (gs *groups) upgradeLocked(cl *group, topics []diskless.TopicDescription, now time.Time) *cgroup {
	for _, m := range cl.members {
		if m.join != nil {
			m.join <- joinAnswer{code: int16(kafkaerr.RebalanceInProgress), generation: -1}
			m.join = nil
		}
		if m.sync != nil {
			m.sync <- syncAnswer{code: int16(kafkaerr.RebalanceInProgress)}
			m.sync = nil
		}
	}
	g := &cgroup{id: cl.id, epoch: cl.generation, targetEpoch: cl.generation, members: map[string]*cmember{}, target: map[string]assignment{}}
	ids := topicIDs(topics)
	for _, om := range cl.ordered() {
		protocols := om.protocols
		if i := slices.IndexFunc(protocols, func(p kmsg.JoinGroupRequestProtocol) bool { return p.Name == cl.protocol }); i > 0 {
			// The group's protocol first: it is the one the member's
			// subscription and assignments are read from.
			protocols = append([]kmsg.JoinGroupRequestProtocol{protocols[i]}, slices.Delete(slices.Clone(protocols), i, i+1)...)
		}
		sub, _ := subscription(protocols)
		m := &cmember{id: om.id, instanceID: om.instanceID, clientID: om.clientID, clientHost: om.clientHost,
			epoch: cl.generation, prevEpoch: cl.generation, rebalanceTimeout: om.rebalance,
			subscribed: slices.Compact(slices.Sorted(slices.Values(sub.Topics))),
			classic:    &classicMeta{session: om.session, protocols: protocols},
			assigned:   assignment{}, owned: assignment{}, expires: now.Add(om.session)}
		if sub.Rack != nil {
			m.rack = *sub.Rack
		}
		var a kmsg.ConsumerMemberAssignment
		if len(om.assignment) > 0 && a.ReadFrom(om.assignment) == nil {
			for _, t := range a.Topics {
				if id, ok := ids[t.Topic]; ok {
					m.assigned[id] = slices.Compact(slices.Sorted(slices.Values(t.Partitions)))
				}
			}
		}
		g.addConsumer(m)
		g.target[m.id] = cloneAssignment(m.assigned)
	}
	g.topics, g.names = g.subscribedTopics(topics)
	delete(gs.mu.groups, cl.id)
	gs.mu.consumer[cl.id] = g
	gs.log.Info("classic group upgraded to a consumer group", zap.String("group", g.id), zap.Int32("group_epoch", g.epoch),
		zap.Int("members", len(g.members)))
	return g
}

// onlyClassicBut reports whether every member of g but leaving is of the
// classic protocol, and there is one at least.
func (g *cgroup) onlyClassicBut(leaving *cmember) bool {
	n := 0
	for _, m := range g.members {
		if m == leaving {
			continue
		}
		if m.classic == nil {
			return false
		}
		n++
	}
	return n > 0
}

// removeOrDowngrade removes the member m of the consumer protocol from g,
// or, if the others are all classic, makes g a classic group of them (see
// above). It reports whether it did, and the outcome of the classic
// group's store. Called with gs.mu held.
func (gs *groups) removeOrDowngrade(g *cgroup, m *cmember, why string, now time.Time) (bool, <-chan error) {
	if m.classic != nil || !g.onlyClassicBut(m) {
		gs.removeConsumer(g, m, why)
		return false, nil
	}
	cl, outcome := gs.downgradeLocked(g, m, nil, now)
	gs.prepareRebalance(cl, now, "downgraded from a consumer group: "+why)
	return true, outcome
}

// downgradeLocked makes the consumer group g a classic group of its
// members but leaving; joining, if not nil, is a classic member that took
// leaving's place (its instance ID), and gets its target. It starts
// storing the classic group, and returns it and the store's outcome
// (nil on a single node). Called with gs.mu held.
func (gs *groups) downgradeLocked(g *cgroup, leaving, joining *cmember, now time.Time) (*group, <-chan error) {
	cl := &group{id: g.id, state: groupStable, generation: g.epoch, protocolType: "consumer", members: map[string]*member{},
		pending: map[string]time.Time{}}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		if m == leaving || m.classic == nil {
			continue
		}
		cl.add(&member{id: m.id, instanceID: m.instanceID, clientID: m.clientID, clientHost: m.clientHost,
			session: m.classic.session, rebalance: m.rebalanceTimeout, protocols: m.classic.protocols, expires: now.Add(m.classic.session)})
	}
	cl.protocol = cl.selectProtocol()
	for _, m := range cl.ordered() {
		target := g.target[m.id]
		if joining != nil && m.id == joining.id && leaving != nil {
			target = g.target[leaving.id]
		}
		var version int16
		for _, p := range m.protocols {
			if p.Name == cl.protocol {
				var md kmsg.ConsumerMemberMetadata
				if md.ReadFrom(p.Metadata) == nil {
					version = md.Version
				}
			}
		}
		m.assignment = encodeAssignment(target, g.names, version)
		if cl.leader == "" {
			cl.leader = m.id
		}
	}
	delete(gs.mu.consumer, g.id)
	gs.mu.groups[g.id] = cl
	var outcome <-chan error
	if gs.store != nil {
		outcome = gs.storeLocked(cl, cl.metadataValue(now))
	}
	gs.log.Info("consumer group downgraded to a classic group", zap.String("group", g.id), zap.Int32("generation", cl.generation),
		zap.Int("members", len(cl.members)))
	return cl, outcome
}

// outcomeStore returns a consumerStore done with the outcome of a
// store of a classic group (nil: none), for an answer to wait on.
func outcomeStore(outcome <-chan error) *consumerStore {
	if outcome == nil {
		return nil
	}
	cs := &consumerStore{done: make(chan struct{})}
	go func() {
		cs.err = <-outcome
		close(cs.done)
	}()
	return cs
}
