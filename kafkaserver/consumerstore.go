package kafkaserver

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// Consumer groups of the KIP-848 protocol (consumergroups.go), kept in
// the coordinator so that a takeover keeps them, as classic groups are
// (groupstore.go). On a cluster node a consumer group's state is stored
// (through Broker.PutGroupMetadata, under the node's claim on the group,
// of generation its group epoch) whenever it changes in a way a takeover
// must see: the group epoch, the target assignment, a member joining,
// leaving or being removed, a member's epoch, subscription, assignment,
// revocation or the partitions it reports owning. A heartbeat whose
// answer depends on the change is answered once the store is done (a
// failed store answers the store's error, and the next heartbeat stores
// again); a heartbeat that changes nothing stores nothing (the encoded
// state is compared with the one last stored), but waits, if a store of
// the group is under way, for it to be done. A group that becomes
// empty has its stored state deleted, and a group created has whatever
// was stored for the name (a classic group's) deleted first, for the
// store keeps a later generation over an earlier one. Expiry of a
// session or a rebalance timeout stores the removal with no answer to
// wait for.
//
// The stored value of a group tells its kind by its first byte:
//
//	classic  : Kafka's GroupMetadataValue; its int16 version (0..3) starts with 0x00
//	consumer : a JSON object, starting with '{' (0x7b), of consumerStored
//
// The JSON form is versioned ("version", part of the format): a node
// reads the versions it knows and starts a group of another afresh
// (logged). A group with no member of the classic protocol is written at
// version 1, one with such members (consumerclassic.go) at version 2, so
// that a node of a release that knows only version 1 does not take them
// for members of the consumer protocol. Version 1 has the group epoch and assignment
// epoch, the assignor, the subscribed topics (ID: partition count) and
// their names, the target assignment by member, the static map (member ID
// by instance ID), and every member: its IDs, client, rack, member epoch
// and the one before, rebalance timeout, subscription (names, regular
// expression, assignor), and its assigned, revoking and owned partitions
// (an assignment is a JSON object of topic ID to sorted partitions).
// Version 2 adds, to a member of the classic protocol, "classic": its
// session timeout and its protocols (name, and metadata in base64) in
// the order it gave them.
// What is not stored: session and rebalance deadlines, and what was last
// sent to each member. A node that loads a group starts every member's
// session at the load, and the rebalance timeout of a revocation under
// way too (as Kafka's coordinator after a load); each member's next
// heartbeat is sent its assignment in full.

// consumerStoredVersion is the version of the JSON form written (part of
// the format).
const (
	consumerStoredVersion        = 1
	consumerStoredVersionClassic = 2 // with members of the classic protocol
)

// consumerStored is the stored form of a consumer group (versions 1 and 2).
type consumerStored struct {
	Version     int                    `json:"version"`
	Kind        string                 `json:"kind"` // "consumer"
	Epoch       int32                  `json:"epoch"`
	TargetEpoch int32                  `json:"target_epoch"`
	Assignor    string                 `json:"assignor,omitempty"`
	Topics      map[uuid.UUID]int32    `json:"topics,omitempty"`
	Names       map[uuid.UUID]string   `json:"names,omitempty"`
	Target      map[string]assignment  `json:"target,omitempty"`
	Static      map[string]string      `json:"static,omitempty"`
	Members     []consumerStoredMember `json:"members"`
}

// consumerStoredMember is one member of a stored consumer group.
type consumerStoredMember struct {
	ID               string     `json:"id"`
	InstanceID       *string    `json:"instance_id,omitempty"`
	Rack             string     `json:"rack,omitempty"`
	ClientID         string     `json:"client_id"`
	ClientHost       string     `json:"client_host"`
	Epoch            int32      `json:"epoch"`
	PrevEpoch        int32      `json:"prev_epoch"`
	RebalanceTimeout int64      `json:"rebalance_timeout_ms"`
	Subscribed       []string   `json:"subscribed,omitempty"`
	Regex            string     `json:"regex,omitempty"`
	ServerAssignor   string     `json:"server_assignor,omitempty"`
	Assigned         assignment `json:"assigned,omitempty"`
	Revoking         assignment `json:"revoking,omitempty"`
	Owned            assignment `json:"owned,omitempty"`
	// Classic is set for a member of the classic protocol (version 2).
	Classic *consumerStoredClassic `json:"classic,omitempty"`
}

// consumerStoredClassic is what a stored member of the classic protocol
// has that others do not.
type consumerStoredClassic struct {
	SessionTimeout int64                    `json:"session_timeout_ms"`
	Protocols      []consumerStoredProtocol `json:"protocols"`
}

// consumerStoredProtocol is one protocol a classic member joined with.
type consumerStoredProtocol struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata"`
}

// appendStored appends g's stored form to dst. It is deterministic (the
// members sorted by ID, maps by key), so that equal states encode
// equally. Called with gs.mu held.
func (g *cgroup) appendStored(dst []byte) []byte {
	v := consumerStored{Version: consumerStoredVersion, Kind: "consumer", Epoch: g.epoch, TargetEpoch: g.targetEpoch,
		Assignor: g.assignor, Topics: g.topics, Names: g.names, Target: g.target, Static: g.static,
		Members: make([]consumerStoredMember, 0, len(g.members))}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		sm := consumerStoredMember{ID: m.id, InstanceID: m.instanceID, Rack: m.rack,
			ClientID: m.clientID, ClientHost: m.clientHost, Epoch: m.epoch, PrevEpoch: m.prevEpoch,
			RebalanceTimeout: m.rebalanceTimeout.Milliseconds(), Subscribed: m.subscribed, Regex: m.regex,
			ServerAssignor: m.serverAssignor, Assigned: m.assigned, Revoking: m.revoking, Owned: m.owned}
		if m.classic != nil {
			v.Version = consumerStoredVersionClassic
			sm.Classic = &consumerStoredClassic{SessionTimeout: m.classic.session.Milliseconds()}
			for _, p := range m.classic.protocols {
				sm.Classic.Protocols = append(sm.Classic.Protocols, consumerStoredProtocol{Name: p.Name, Metadata: p.Metadata})
			}
		}
		v.Members = append(v.Members, sm)
	}
	b, err := json.Marshal(v)
	if err != nil { // maps of strings and UUIDs: cannot happen
		panic(fmt.Sprintf("kafkaserver: encoding consumer group %q: %v", g.id, err))
	}
	return append(dst, b...)
}

// isConsumerStored reports whether a stored group value is a consumer
// group's (see above), not a classic group's.
func isConsumerStored(value []byte) bool {
	return len(value) > 0 && value[0] == '{'
}

// decodeConsumerStored decodes a consumer group of ID id from its stored
// form; members' sessions (and revocations' rebalance timeouts) start at
// now, for session.
func decodeConsumerStored(id string, value []byte, now time.Time, session time.Duration) (*cgroup, error) {
	var v consumerStored
	if err := json.Unmarshal(value, &v); err != nil {
		return nil, fmt.Errorf("kafkaserver: the stored state of consumer group %q does not decode: %w", id, err)
	}
	if v.Version != consumerStoredVersion && v.Version != consumerStoredVersionClassic || v.Kind != "consumer" {
		return nil, fmt.Errorf("kafkaserver: the stored state of consumer group %q is of version %d, kind %q; this node reads versions %d and %d",
			id, v.Version, v.Kind, consumerStoredVersion, consumerStoredVersionClassic)
	}
	g := &cgroup{id: id, epoch: v.Epoch, targetEpoch: v.TargetEpoch, assignor: v.Assignor, topics: v.Topics, names: v.Names,
		members: map[string]*cmember{}, target: v.Target, static: v.Static}
	if g.target == nil {
		g.target = map[string]assignment{}
	}
	orEmpty := func(a assignment) assignment {
		if a == nil {
			return assignment{}
		}
		return a
	}
	for _, sm := range v.Members {
		m := &cmember{id: sm.ID, instanceID: sm.InstanceID, rack: sm.Rack, clientID: sm.ClientID, clientHost: sm.ClientHost,
			epoch: sm.Epoch, prevEpoch: sm.PrevEpoch, rebalanceTimeout: time.Duration(sm.RebalanceTimeout) * time.Millisecond,
			subscribed: sm.Subscribed, regex: sm.Regex, serverAssignor: sm.ServerAssignor,
			assigned: orEmpty(sm.Assigned), revoking: sm.Revoking, owned: orEmpty(sm.Owned), expires: now.Add(session)}
		if c := sm.Classic; c != nil && v.Version >= consumerStoredVersionClassic {
			m.classic = &classicMeta{session: time.Duration(c.SessionTimeout) * time.Millisecond}
			for _, p := range c.Protocols {
				m.classic.protocols = append(m.classic.protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: p.Metadata})
			}
			if len(m.classic.protocols) == 0 {
				return nil, fmt.Errorf("kafkaserver: stored consumer group %q: classic member %q has no protocols", id, m.id)
			}
			m.expires = now.Add(m.classic.session)
		}
		if len(m.revoking) == 0 {
			m.revoking = nil
		} else {
			m.revokeBy = now.Add(m.rebalanceTimeout)
		}
		if m.regex != "" {
			re, err := regexp.Compile("^(?:" + m.regex + ")$")
			if err != nil {
				return nil, fmt.Errorf("kafkaserver: stored consumer group %q: member %q: %w", id, m.id, err)
			}
			m.re = re
		}
		g.members[m.id] = m
	}
	if g.static == nil {
		for _, m := range g.members {
			if m.instanceID != nil {
				if g.static == nil {
					g.static = map[string]string{}
				}
				g.static[*m.instanceID] = m.id
			}
		}
	}
	return g, nil
}

// restoreConsumer makes consumer group id's state the one stored
// (value, in the form above).
func (gs *groups) restoreConsumer(id string, value []byte, now time.Time) error {
	g, err := decodeConsumerStored(id, value, now, gs.opts.ConsumerSession)
	if err != nil {
		return err
	}
	g.stored = value
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.mu.consumer[id] != nil || gs.mu.groups[id] != nil {
		return nil // requests came first (they cannot, during a takeover)
	}
	gs.mu.consumer[id] = g
	gs.log.Info("consumer group loaded", zap.String("group", id), zap.Int32("group_epoch", g.epoch), zap.Int("members", len(g.members)))
	return nil
}

// storeConsumerLocked starts storing g's state if it differs from the one
// last stored (an empty group: deleting it), and returns the store, for
// the answer that depends on it to wait for. If nothing changed but a
// store of g is still under way, it returns that one: the state the
// answer shows is stored once it is done. It returns nil when there is
// nothing to wait for (or on a single node). Called with gs.mu held.
func (gs *groups) storeConsumerLocked(g *cgroup) *consumerStore {
	if gs.store == nil {
		return nil
	}
	var value []byte
	if len(g.members) > 0 {
		value = g.appendStored(nil)
	}
	if g.storedOnce && slices.Equal(value, g.stored) {
		if last := g.lastStore; last != nil {
			select {
			case <-last.done:
			default:
				return last
			}
		}
		return nil
	}
	g.stored, g.storedOnce = value, true
	cs := &consumerStore{done: make(chan struct{})}
	outcome := gs.storeValueLocked(g.id, g.epoch, value)
	go func() {
		cs.err = <-outcome
		close(cs.done)
	}()
	g.lastStore = cs
	return cs
}

// consumerStore is one store of a consumer group under way: done is
// closed when it is, and err is then its outcome.
type consumerStore struct {
	done chan struct{}
	err  error
}

// wait waits for the store to be done, and returns its outcome.
func (cs *consumerStore) wait() error {
	<-cs.done
	return cs.err
}
