package kafkaserver

import (
	"context"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/kafkaerr"
)

// groupOptions configures the group coordinator. The zero value holds
// Kafka's defaults, except InitialRebalanceDelay.
type groupOptions struct {
	// MinSessionTimeout and MaxSessionTimeout bound the session timeouts
	// members may ask for (group.min.session.timeout.ms, 6 s, and
	// group.max.session.timeout.ms, 30 min); outside them JoinGroup is
	// INVALID_SESSION_TIMEOUT.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// clock is the time source of sessions and barriers: the Broker's,
	// set by the Server; nil means clock.System.
	clock clock.Clock
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms: the
	// first rebalance of an empty group waits this long for more members
	// (each new one restarting the wait, up to the rebalance timeout), so
	// that consumers started together share the first generation. 0
	// means none.
	InitialRebalanceDelay time.Duration
	// Tick is how often session timeouts and barrier deadlines are
	// checked; 0 means 50 ms.
	Tick time.Duration
	// ConsumerHeartbeat is the heartbeat interval of KIP-848 consumer
	// groups (group.consumer.heartbeat.interval.ms); 0 means 5 s.
	ConsumerHeartbeat time.Duration
	// ConsumerSession is their session timeout
	// (group.consumer.session.timeout.ms); 0 means 45 s.
	ConsumerSession time.Duration
}

// groupState is a group's state in the classic group protocol.
type groupState int8

// The states of a group, as Kafka names them.
const (
	groupEmpty               groupState = iota // no members
	groupPreparingRebalance                    // the join barrier: waiting for members to (re)join
	groupCompletingRebalance                   // the sync barrier: waiting for the leader's assignment
	groupStable                                // every member has its assignment
)

func (s groupState) String() string {
	return [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable"}[s]
}

// groups is the group coordinator of the classic consumer group protocol,
// in memory: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and the
// checks OffsetCommit makes. Members are assigned by their leader (the
// client runs the assignor), as in Kafka. A goroutine expires sessions
// and closes barriers whose time is up. It is safe for concurrent use.
type groups struct {
	opts  groupOptions
	log   *zap.Logger
	store groupStoreFunc // nil on a single node (groupstore.go)
	// claimOf returns the node's claim on a group (with store); it takes
	// the ownership's lock, so ownership never calls into groups holding
	// that.
	claimOf func(group string) int64
	// topicsOf returns the broker's topics, for the classic members of
	// consumer groups (consumerclassic.go); nil in a bare test server.
	topicsOf func(ctx context.Context) ([]diskless.TopicDescription, error)

	mu struct {
		sync.Mutex
		groups   map[string]*group
		consumer map[string]*cgroup // of the KIP-848 protocol (consumergroups.go)
		// storing holds, by group, a channel closed when the group's
		// last store started is done (groupstore.go).
		storing map[string]chan struct{}
		// lastTick is when tick last ran (a long gap since is a pause).
		lastTick time.Time
		// emptyGens holds what is kept of groups that went empty and
		// were dropped from memory: their generation (a consumer group's
		// epoch), that a group that forms again goes on from, as in
		// Kafka, where an empty group keeps its generation until it is
		// deleted (a member dropped while it still consumed claims its
		// partitions at its old generation; a group started again at 1
		// would make that claim look current to the assignor); and
		// their kind and protocol type, that ListGroups, DescribeGroups
		// and ConsumerGroupDescribe tell of an empty group with
		// committed offsets, as Kafka tells them of the empty group it
		// keeps. At most maxEmptyGenerations entries.
		emptyGens map[string]emptyGroup
	}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// group is one consumer group; its fields are under groups.mu.
type group struct {
	id           string
	state        groupState
	generation   int32
	protocolType string
	protocol     string // chosen at the end of the join barrier
	leader       string
	members      map[string]*member
	// static maps the instance IDs of static members to their member
	// IDs (groupstatic.go); nil while there are none.
	static map[string]string
	// pending are the member IDs handed out with MEMBER_ID_REQUIRED,
	// and when each expires unless its member joins with it.
	pending map[string]time.Time
	// deadline closes the current barrier: join (PreparingRebalance) or
	// sync (CompletingRebalance).
	deadline time.Time
	// initialUntil, while the first rebalance of an empty group waits for
	// more members; initialCap bounds it.
	initialUntil, initialCap time.Time
	joins                    int // members ever added: their join order
}

// member is one member of a group.
type member struct {
	id                   string
	instanceID           *string
	clientID, clientHost string
	session, rebalance   time.Duration
	protocols            []kmsg.JoinGroupRequestProtocol
	expires              time.Time // the session ends unless a heartbeat comes
	order                int       // join order in the group
	assignment           []byte
	// join and sync are set while the member's JoinGroup or SyncGroup
	// waits for its barrier: the answer goes there.
	join chan joinAnswer
	sync chan syncAnswer
}

// joinAnswer is what a waiting JoinGroup gets.
type joinAnswer struct {
	code                   int16
	generation             int32
	protocolType, protocol string
	leader                 string
	members                []kmsg.JoinGroupResponseMember // for the leader
	skipAssignment         bool                           // for a static leader that joined again (groupstatic.go)
}

// syncAnswer is what a waiting SyncGroup gets.
type syncAnswer struct {
	code                   int16
	protocolType, protocol string
	assignment             []byte
}

// newGroups returns a group coordinator and starts its timer goroutine;
// Close stops it.
func newGroups(opts groupOptions, log *zap.Logger) *groups {
	if opts.MinSessionTimeout == 0 {
		opts.MinSessionTimeout = 6 * time.Second
	}
	if opts.MaxSessionTimeout == 0 {
		opts.MaxSessionTimeout = 30 * time.Minute
	}
	if opts.Tick <= 0 {
		opts.Tick = 50 * time.Millisecond
	}
	opts.clock = clock.Or(opts.clock)
	if opts.ConsumerHeartbeat <= 0 {
		opts.ConsumerHeartbeat = consumerGroupHeartbeat
	}
	if opts.ConsumerSession <= 0 {
		opts.ConsumerSession = consumerGroupSession
	}
	if log == nil {
		log = zap.NewNop()
	}
	gs := &groups{opts: opts, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	gs.mu.groups = map[string]*group{}
	gs.mu.consumer = map[string]*cgroup{}
	gs.mu.storing = map[string]chan struct{}{}
	gs.mu.emptyGens = map[string]emptyGroup{}
	go pprof.Do(context.Background(), pprof.Labels("kafkaserver", "groups"), func(context.Context) {
		defer close(gs.done)
		t := clock.NewTicker(opts.clock, opts.Tick)
		defer t.Stop()
		for {
			select {
			case <-gs.stop:
				return
			case <-t.C:
				gs.tick(opts.clock.Now())
			}
		}
	})
	return gs
}

// Close stops the timer goroutine. Requests waiting at a barrier end with
// their context. It is safe to call twice.
func (gs *groups) Close() {
	gs.closeOnce.Do(func() { close(gs.stop) })
	<-gs.done
}

func ms(n int32) time.Duration { return time.Duration(n) * time.Millisecond }

// checkCommit returns the error code of an OffsetCommit by member of
// generation in group, by Kafka's rules: a commit without a generation
// (-1) is for groups nobody is a member of (admin tools, consumers that
// assign partitions themselves); else the member must be in the group at
// its generation, and not at the sync barrier; a commit that names an
// instance ID must come from the member the group maps it to. In a consumer group
// (KIP-848) the generation is the member epoch (checkConsumerCommit).
func (gs *groups) checkCommit(group string, generation int32, memberID string, instanceID *string, version int16, tps []topicPartition) int16 {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if code, ok := gs.checkConsumerCommit(group, generation, memberID, tps); ok {
		return code
	}
	g := gs.mu.groups[group]
	if g != nil && g.state != groupEmpty && instanceID != nil {
		// A static member's: it must be the one its instance ID maps
		// to (FENCED_INSTANCE_ID), as in Kafka, before any other check.
		if code := g.validateMember(memberID, instanceID); code != 0 {
			return code
		}
	}
	switch {
	case group == "":
		return int16(kafkaerr.InvalidGroupID)
	case g == nil || g.state == groupEmpty:
		if generation < 0 {
			return 0
		}
		return int16(kafkaerr.IllegalGeneration)
	case g.members[memberID] == nil:
		return int16(kafkaerr.UnknownMemberID)
	case generation != g.generation:
		return int16(kafkaerr.IllegalGeneration)
	case g.state == groupCompletingRebalance:
		// The member and generation are right: it joined, and commits
		// before its SyncGroup's answer (checked last, as in Kafka).
		return int16(kafkaerr.RebalanceInProgress)
	}
	return 0
}

// checkTxnCommit returns the error code of a TxnOffsetCommit by memberID
// at generation (KIP-447, version 3; before it, no member and generation
// -1), as Kafka 4's group coordinator decides it (validateOffsetCommit of
// a transactional commit): in a classic group no member and generation -1
// is a producer outside the group, accepted; in a consumer group (KIP-848)
// a member epoch below 0 is accepted while the group has no members.
// Otherwise a member the group does not have is UNKNOWN_MEMBER_ID (in a
// classic group, one whose instance ID the group maps to another member
// FENCED_INSTANCE_ID), and
// another generation (a consumer group member's epoch)
// ILLEGAL_GENERATION.
func (gs *groups) checkTxnCommit(group string, generation int32, memberID string, instanceID *string) int16 {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if group == "" {
		return int16(kafkaerr.InvalidGroupID)
	}
	var gen int32
	var known bool
	if cg := gs.mu.consumer[group]; cg != nil {
		if generation < 0 && len(cg.members) == 0 {
			return 0
		}
		m := cg.members[memberID]
		known = m != nil
		if known {
			gen = m.epoch
		}
	} else {
		if generation < 0 && memberID == "" && instanceID == nil {
			return 0
		}
		g := gs.mu.groups[group]
		if g != nil && instanceID != nil {
			if code := g.validateMember(memberID, instanceID); code != 0 {
				return code // FENCED_INSTANCE_ID: another member has the instance ID
			}
		}
		known = g != nil && g.members[memberID] != nil
		if known {
			gen = g.generation
		}
	}
	switch {
	case !known:
		return int16(kafkaerr.UnknownMemberID)
	case generation != gen:
		return int16(kafkaerr.IllegalGeneration)
	}
	return 0
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// tryDelete forgets an empty group; a group with members is
// NON_EMPTY_GROUP. It reports whether the coordinator knew the group.
func (gs *groups) tryDelete(id string) (known bool, code int16) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.mu.groups[id]
	if cg := gs.mu.consumer[id]; cg != nil {
		if len(cg.members) > 0 {
			return true, int16(kafkaerr.NonEmptyGroup)
		}
		delete(gs.mu.consumer, id)
		return true, 0
	}
	switch {
	case g == nil:
		return false, 0
	case len(g.members) > 0 || len(g.pending) > 0:
		return true, int16(kafkaerr.NonEmptyGroup)
	}
	delete(gs.mu.groups, id)
	return true, 0
}

// maxEmptyGenerations bounds groups.mu.emptyGens: past it, an arbitrary
// entry goes (that group, if it forms again, starts at generation 1).
const maxEmptyGenerations = 1 << 16

// emptyGroup is what is kept of a group that went empty (groups.mu.emptyGens).
type emptyGroup struct {
	generation   int32 // a classic group's generation, a consumer group's epoch
	protocolType string
	consumer     bool // a group of the consumer protocol (KIP-848)
}

// kind is the group's type, as ListGroups names it.
func (e emptyGroup) kind() string {
	if e.consumer {
		return "consumer"
	}
	return "classic"
}

// keepEmptyLocked remembers group id, empty and dropped from memory (or
// stored so: restore), for when it forms again and for those who look at
// it meanwhile. Called with gs.mu held.
func (gs *groups) keepEmptyLocked(id string, e emptyGroup) {
	if old, ok := gs.mu.emptyGens[id]; ok && e.generation < old.generation {
		e.generation = old.generation
	}
	if _, ok := gs.mu.emptyGens[id]; !ok && len(gs.mu.emptyGens) >= maxEmptyGenerations {
		for k := range gs.mu.emptyGens {
			delete(gs.mu.emptyGens, k)
			break
		}
	}
	gs.mu.emptyGens[id] = e
}

// emptyOf returns what is kept of group id, empty and dropped from
// memory, if anything is.
func (gs *groups) emptyOf(id string) (emptyGroup, bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	e, ok := gs.mu.emptyGens[id]
	return e, ok
}

// deleted forgets group id, deleted (DeleteGroups): its generation, and
// its stored state on a cluster node; a group of that name formed later
// starts at generation 1, as in Kafka.
func (gs *groups) deleted(id string) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	delete(gs.mu.emptyGens, id)
	if gs.mu.groups[id] == nil && gs.mu.consumer[id] == nil {
		gs.storeLocked(&group{id: id}, nil)
	}
}

// subscribedTopics returns the topics a non-empty group's members
// subscribe to (from the consumer protocol's member metadata), and
// whether the group has members.
func (gs *groups) subscribedTopics(id string) (map[string]bool, bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.mu.groups[id]
	if cg := gs.mu.consumer[id]; cg != nil && len(cg.members) > 0 {
		topics := map[string]bool{}
		for _, m := range cg.members {
			for _, t := range m.subscribed {
				topics[t] = true
			}
		}
		for _, name := range cg.names { // regular expressions: what they matched
			topics[name] = true
		}
		return topics, true
	}
	if g == nil || len(g.members) == 0 {
		return nil, false
	}
	topics := map[string]bool{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			var md kmsg.ConsumerMemberMetadata
			if g.protocolType == "consumer" && md.ReadFrom(p.Metadata) == nil {
				for _, t := range md.Topics {
					topics[t] = true
				}
			}
		}
	}
	return topics, true
}

// forget drops a group that this node no longer coordinates (or takes
// over afresh): the members waiting at its barriers are told
// NOT_COORDINATOR, so that they look the coordinator up again.
func (gs *groups) forget(id string) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	delete(gs.mu.emptyGens, id) // stale too: a takeover loads the stored one
	if cg := gs.mu.consumer[id]; cg != nil {
		delete(gs.mu.consumer, id) // its members' next heartbeats are UNKNOWN_MEMBER_ID, and they join again
		gs.log.Info("consumer group dropped: coordinated elsewhere, or taken over afresh", zap.String("group", id), zap.Int32("group_epoch", cg.epoch))
	}
	g := gs.mu.groups[id]
	if g == nil {
		return
	}
	for _, m := range g.members {
		if m.join != nil {
			m.join <- joinAnswer{code: int16(kafkaerr.NotCoordinator), generation: -1}
			m.join = nil
		}
		if m.sync != nil {
			m.sync <- syncAnswer{code: int16(kafkaerr.NotCoordinator)}
			m.sync = nil
		}
	}
	delete(gs.mu.groups, id)
	gs.log.Info("group dropped: coordinated elsewhere, or taken over afresh", zap.String("group", id), zap.Int32("generation", g.generation))
}
