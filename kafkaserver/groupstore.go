package kafkaserver

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Classic groups' membership, kept in the coordinator so that a takeover
// keeps it. On a cluster node, a group's state is stored (as Kafka's
// GroupMetadataValue, version 3, through Broker.PutGroupMetadata, under
// the node's claim on the group) when a generation completes, before the
// members get their assignments, and deleted when the group becomes
// empty; stores of one group are made in order. A node that takes a group
// over loads it: its members, at their generation and with their
// assignments, carry on (their heartbeats and commits are accepted) with
// no rebalance, as in Kafka when a broker loads a group from
// __consumer_offsets; static members keep their instance IDs, so that one
// that restarts joins again with no rebalance (groupstatic.go). Their
// sessions start at the load. Groups of the consumer protocol (KIP-848)
// are stored too, in a form of their own that the first byte of a stored
// value tells from this one (consumerstore.go). A single node stores
// nothing.

// groupStoreFunc stores a group's metadata value of generation under
// claim (the node's claim on the group when the store was decided); a
// nil value deletes it.
type groupStoreFunc func(ctx context.Context, group string, claim int64, generation int32, value []byte) error

// storeLocked starts storing g's state (nil: deleting it) after the
// stores of the group started before, and returns a channel that gets the
// outcome. With no store (a single node), the outcome is nil at once.
// Called with gs.mu held.
func (gs *groups) storeLocked(g *group, value []byte) <-chan error {
	return gs.storeValueLocked(g.id, g.generation, value)
}

// storeValueLocked is storeLocked of the group id's value of generation
// gen (a classic group's generation, a consumer group's epoch).
func (gs *groups) storeValueLocked(id string, gen int32, value []byte) <-chan error {
	done := make(chan error, 1)
	if gs.store == nil {
		done <- nil
		return done
	}
	prev := gs.mu.storing[id]
	mine := make(chan struct{})
	gs.mu.storing[id] = mine
	// The claim now, while g is the group's state: if the node lost the
	// group since, the store is refused.
	claim := gs.claimOf(id)
	go func() {
		defer close(mine)
		if prev != nil {
			<-prev
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := gs.store(ctx, id, claim, gen, value)
		if err != nil {
			gs.log.Warn("storing a group", zap.String("group", id), zap.Int32("generation", gen), zap.Error(err))
		}
		done <- err
		gs.mu.Lock()
		if gs.mu.storing[id] == mine {
			delete(gs.mu.storing, id)
		}
		gs.mu.Unlock()
	}()
	return done
}

// metadataValue encodes g's state as Kafka's GroupMetadataValue
// (version 3). Called with gs.mu held.
func (g *group) metadataValue(now time.Time) []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = 3
	v.ProtocolType, v.Generation = g.protocolType, g.generation
	v.Protocol, v.Leader = kmsg.StringPtr(g.protocol), kmsg.StringPtr(g.leader)
	v.CurrentStateTimestamp = now.UnixMilli()
	for _, m := range g.ordered() {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.InstanceID, vm.ClientID, vm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		vm.RebalanceTimeoutMillis, vm.SessionTimeoutMillis = int32(m.rebalance/time.Millisecond), int32(m.session/time.Millisecond)
		for _, p := range m.protocols {
			if p.Name == g.protocol {
				vm.Subscription = p.Metadata
			}
		}
		vm.Assignment = m.assignment
		v.Members = append(v.Members, vm)
	}
	return v.AppendTo(nil)
}

// restore makes group's state the one stored: a consumer group's
// (consumerstore.go), or a classic group's (a GroupMetadataValue): a
// stable group of its members, whose sessions start now. Of a value
// without members (an empty group) only the generation is kept, for the
// group to go on from when it forms again.
func (gs *groups) restore(id string, value []byte, now time.Time) error {
	if isConsumerStored(value) {
		return gs.restoreConsumer(id, value, now) // consumerstore.go
	}
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return fmt.Errorf("kafkaserver: the stored state of group %q does not decode: %w", id, err)
	}
	if len(v.Members) == 0 || v.Protocol == nil || v.Leader == nil {
		// Empty: only its generation, which the group goes on from.
		gs.mu.Lock()
		defer gs.mu.Unlock()
		if gs.mu.groups[id] == nil {
			gs.keepEmptyLocked(id, emptyGroup{generation: v.Generation, protocolType: v.ProtocolType})
		}
		return nil
	}
	g := &group{id: id, state: groupStable, generation: v.Generation, protocolType: v.ProtocolType, protocol: *v.Protocol,
		leader: *v.Leader, members: map[string]*member{}, pending: map[string]time.Time{}}
	for i, vm := range v.Members {
		m := &member{id: vm.MemberID, instanceID: vm.InstanceID, clientID: vm.ClientID, clientHost: vm.ClientHost,
			session: ms(vm.SessionTimeoutMillis), rebalance: ms(vm.RebalanceTimeoutMillis), order: i, assignment: vm.Assignment,
			protocols: []kmsg.JoinGroupRequestProtocol{{Name: *v.Protocol, Metadata: vm.Subscription}}}
		m.expires = now.Add(m.session)
		g.members[m.id] = m
		if m.instanceID != nil { // static: the mapping is kept (groupstatic.go)
			if g.static == nil {
				g.static = map[string]string{}
			}
			g.static[*m.instanceID] = m.id
		}
	}
	g.joins = len(v.Members)
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.mu.consumer[id] != nil || gs.mu.groups[id] != nil {
		return nil // requests came first (they cannot, during a takeover)
	}
	gs.mu.groups[id] = g
	gs.log.Info("group loaded", zap.String("group", id), zap.Int32("generation", g.generation), zap.Int("members", len(g.members)))
	return nil
}

// storeGroup stores a group's metadata in the coordinator under this
// node's claim on it (a groupStoreFunc); NOT_COORDINATOR if this node
// held none (it gave the group up) or another node claimed it since
// (then it gives it up).
func (s *Server) storeGroup(ctx context.Context, group string, claim int64, generation int32, value []byte) error {
	if claim == 0 {
		return kafkaerr.New(kafkaerr.NotCoordinator, "this node no longer coordinates group %q", group)
	}
	err := s.b.PutGroupMetadata(ctx, group, claim, int64(generation), value)
	s.fenced(group, claim, err)
	return err
}

// loadGroup loads a group's stored state (takeOver).
func (s *Server) loadGroup(ctx context.Context, group string) error {
	md, err := s.b.GroupMetadata(ctx, group)
	if err != nil || md.Value == nil {
		return err
	}
	if err := s.groups.restore(group, md.Value, s.clock.Now()); err != nil {
		s.log.Warn("loading a group: starting it afresh", zap.String("group", group), zap.Error(err))
	}
	return nil
}
