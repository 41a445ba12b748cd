package clustertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/kafkaerr"
)

// BackendOptions configure RunBackendWith. The zero value holds the
// defaults; a nil *BackendOptions means the zero value.
type BackendOptions struct {
	// Bubble runs each subtest inside a testing/synctest bubble of its
	// own, newBackend included, so that its time is virtual: for a
	// Backend that does no I/O outside the process (memcluster's).
	Bubble bool
	// LeaseTTL is the members' JoinOptions.LeaseTTL; 0 means 1 s.
	LeaseTTL time.Duration
	// Skip names subtests to skip, each with the reason: the promises a
	// Backend is known to break, said where it runs the suite.
	Skip map[string]string
}

// backendBound is how long the suite waits for what a Backend promises
// to happen eventually (a member seen, a leader elected): many lease
// TTLs, so that a loaded machine does not fail it; only a hang does. In
// a bubble the time is virtual.
const backendBound = 60 * time.Second

// RunBackend runs the conformance suite for cluster.Backend against the
// Backend that newBackend returns: a new one for each subtest (or one
// shared; the subtests use prefixes of their own). A test calls it from
// its own Test function:
//
//	func TestBackend(t *testing.T) {
//		clustertest.RunBackend(t, func(t *testing.T) cluster.Backend { ... })
//	}
//
// Each member connects with a Conn of its own, under a prefix named for
// the subtest, and joins with a LeaseTTL of 1 s over one cluster.Mem
// transport. The suite checks that:
//   - members that join see each other, as each registered itself;
//   - every shard comes to have exactly one member told it leads
//     (Callbacks.Lead), and every member names that one as its Leader;
//     when a member is told it leads, the log of the one told before,
//     if that one has not been told it lost (Unlead), takes no appends;
//   - the leader's log takes appends, a follower's log of the shard
//     (Conn.OpenLog) reads them, its Wait wakes at an append, and
//     Callbacks.Appended is called on every member;
//   - a leader's log is a metalog.Confirmer and a metalog.Leased, and
//     confirms the leadership, and its lease held, while it holds;
//   - a Node that closes has given up its leaderships (Unlead) when
//     Close returns, the others lead its shards and stop naming it, and
//     its logs take no more appends and confirm no leadership
//     (metalog.ErrFenced);
//   - a led shard whose Callbacks.Healthy fails is given up (Unlead) and
//     led again;
//   - features: the first broker with features finalizes each at the
//     lowest level the live members support; UpdateFeatures raises
//     levels all or none, only when every live member supports them,
//     never lowers one, refuses unknown features (INVALID_UPDATE_VERSION,
//     nothing changed), changes nothing with validateOnly, and grows the
//     epoch; a broker that does not support a finalized level is refused
//     at Join with INVALID_UPDATE_VERSION; every member comes to see the
//     levels.
func RunBackend(t *testing.T, newBackend func(t *testing.T) cluster.Backend) {
	t.Helper()
	RunBackendWith(t, nil, newBackend)
}

// RunBackendWith is RunBackend with options.
func RunBackendWith(t *testing.T, opts *BackendOptions, newBackend func(t *testing.T) cluster.Backend) {
	t.Helper()
	var o BackendOptions
	if opts != nil {
		o = *opts
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = time.Second
	}
	for _, tc := range []struct {
		name string
		fn   func(*suite)
	}{
		{"Members", testMembers},
		{"OneLeaderPerShard", testOneLeaderPerShard},
		{"LogAppendAndFollow", testLogAppendAndFollow},
		{"CloseGivesUpLeadership", testCloseGivesUpLeadership},
		{"Unhealthy", testUnhealthy},
		{"Features", testFeatures},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if why, ok := o.Skip[tc.name]; ok {
				t.Skip(why)
			}
			run := func(t *testing.T) {
				s := &suite{t: t, opts: o, backend: newBackend(t), holders: map[int]int32{}, holderLogs: map[int]metalog.Log{}}
				s.prefix = "clustertest/" + strings.ReplaceAll(t.Name(), "/", "-") + "/"
				tc.fn(s)
			}
			if o.Bubble {
				synctest.Test(t, run)
			} else {
				run(t)
			}
		})
	}
}

// suite is one subtest's cluster: its Backend, prefix and transport,
// and who leads what, as the members' callbacks said.
type suite struct {
	t       *testing.T
	opts    BackendOptions
	backend cluster.Backend
	prefix  string
	tr      cluster.Mem

	mu         sync.Mutex
	holders    map[int]int32       // by shard: the member told it leads, last
	holderLogs map[int]metalog.Log // and the log it was given
	overlaps   []string            // Leads while another member's appends landed
}

// member is one broker of a suite: its Conn, Node and what its
// callbacks were told.
type member struct {
	s    *suite
	id   int32
	conn cluster.Conn
	node cluster.Node

	mu        sync.Mutex
	logs      map[int]metalog.Log // the shards led, with their logs
	leads     map[int]int         // by shard: Lead calls
	unleads   map[int]int         // by shard: Unlead calls
	failLead  bool                // Lead fails
	unhealthy atomic.Int32        // Healthy fails this many more times
	appended  atomic.Int64        // Callbacks.Appended calls
}

func (s *suite) newMember(id int32) *member {
	return &member{s: s, id: id, logs: map[int]metalog.Log{}, leads: map[int]int{}, unleads: map[int]int{}}
}

// join connects and joins member id with shards and the member's
// fields in m (ID aside); the Node and Conn close when the test ends.
func (s *suite) join(m cluster.Member, shards int) (*member, error) {
	t := s.t
	t.Helper()
	mb := s.newMember(m.ID)
	conn, err := s.backend.Connect(t.Context(), &cluster.ConnectOptions{Prefix: s.prefix})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	m.PeerAddr = ""
	node, err := conn.Join(t.Context(), &cluster.JoinOptions{Member: m, Shards: shards, LeaseTTL: s.opts.LeaseTTL, Transport: &s.tr}, mb.callbacks())
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { node.Close() })
	mb.conn, mb.node = conn, node
	return mb, nil
}

// mustJoin is join that fails the test on an error.
func (s *suite) mustJoin(id int32, shards int) *member {
	s.t.Helper()
	mb, err := s.join(cluster.Member{ID: id}, shards)
	require.NoError(s.t, err, "member %d joins", id)
	return mb
}

func (mb *member) callbacks() cluster.Callbacks {
	s := mb.s
	return cluster.Callbacks{
		Lead: func(_ context.Context, shard int, log metalog.Log) error {
			mb.mu.Lock()
			defer mb.mu.Unlock()
			if mb.failLead {
				return errors.New("clustertest: Lead fails")
			}
			mb.logs[shard] = log
			mb.leads[shard]++
			s.mu.Lock()
			prev, prevLog := s.holders[shard], s.holderLogs[shard]
			s.holders[shard], s.holderLogs[shard] = mb.id, log
			s.mu.Unlock()
			if prevLog != nil && prev != mb.id {
				// The member told it led before has not been told it
				// lost: its log must take no appends.
				if appendOne(s.t, prevLog, []byte("from an old leader")) == nil {
					s.mu.Lock()
					s.overlaps = append(s.overlaps, fmt.Sprintf("shard %d: member %d told it leads while member %d's appends still landed", shard, mb.id, prev))
					s.mu.Unlock()
				}
			}
			return nil
		},
		Unlead: func(shard int) {
			mb.mu.Lock()
			delete(mb.logs, shard)
			mb.mu.Unlock()
			s.mu.Lock()
			if s.holders[shard] == mb.id {
				delete(s.holders, shard)
				delete(s.holderLogs, shard)
			}
			s.mu.Unlock()
			mb.mu.Lock()
			mb.unleads[shard]++
			mb.mu.Unlock()
		},
		Serve: func(context.Context, int, string, []byte) func() []byte { return func() []byte { return nil } },
		Healthy: func(int) error {
			if mb.unhealthy.Add(-1) >= 0 {
				return errors.New("clustertest: unhealthy")
			}
			mb.unhealthy.Store(0)
			return nil
		},
		Appended: func() { mb.appended.Add(1) },
	}
}

// appendOne appends entry and returns its result's error, failing the
// test if none comes within backendBound.
func appendOne(t *testing.T, log metalog.Log, entry []byte) error {
	select {
	case r := <-log.Append(entry):
		return r.Err
	case <-time.After(backendBound):
		t.Errorf("an append got no result within %v", backendBound)
		return errors.New("clustertest: no result")
	}
}

// led returns the log of shard if mb leads it.
func (mb *member) led(shard int) (metalog.Log, bool) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	l, ok := mb.logs[shard]
	return l, ok
}

func (mb *member) count(m map[int]int, shard int) int {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return m[shard]
}

// eventually waits until cond holds, failing the test if it does not
// within backendBound. It polls (in a bubble, on virtual time).
func (s *suite) eventually(cond func() bool, format string, args ...any) {
	s.t.Helper()
	deadline := time.Now().Add(backendBound)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("not within %v: "+format, append([]any{backendBound}, args...)...)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leaders returns, by shard, the member whose callbacks say it leads
// it, for the shards exactly one member leads.
func (s *suite) leaders(ms []*member, shards int) map[int]*member {
	out := map[int]*member{}
	for i := range shards {
		var who []*member
		for _, mb := range ms {
			if _, ok := mb.led(i); ok {
				who = append(who, mb)
			}
		}
		if len(who) == 1 {
			out[i] = who[0]
		}
	}
	return out
}

// agreed reports whether every shard has one leader, which every member
// in ms names.
func (s *suite) agreed(ms []*member, shards int) bool {
	l := s.leaders(ms, shards)
	if len(l) != shards {
		return false
	}
	for i, leader := range l {
		for _, mb := range ms {
			if m, ok := mb.node.Leader(i); !ok || m.ID != leader.id {
				return false
			}
		}
	}
	return true
}

func (s *suite) noOverlaps() {
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Empty(s.t, s.overlaps, "two members' appends to a shard's log landed")
}

func ids(ms []cluster.Member) []int32 {
	out := make([]int32, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func testMembers(s *suite) {
	var ms []*member
	want := map[int32]cluster.Member{}
	for id := int32(1); id <= 3; id++ {
		m := cluster.Member{ID: id, Rack: fmt.Sprintf("rack-%d", id), Advertise: fmt.Sprintf("host-%d:9092", id), Speaks: map[string]int{"commit": int(id)}}
		mb, err := s.join(m, 1)
		require.NoError(s.t, err)
		ms, want[id] = append(ms, mb), m
	}
	s.eventually(func() bool {
		for _, mb := range ms {
			if !slices.Equal(ids(mb.node.Members()), []int32{1, 2, 3}) {
				return false
			}
		}
		return true
	}, "every member sees the three")
	for _, mb := range ms {
		for _, got := range mb.node.Members() {
			w := want[got.ID]
			require.Equal(s.t, w.Rack, got.Rack)
			require.Equal(s.t, w.Advertise, got.Advertise)
			require.Equal(s.t, w.Speaks, got.Speaks)
			require.NotEmpty(s.t, got.PeerAddr, "a member registers the address it serves on")
		}
	}
}

func testOneLeaderPerShard(s *suite) {
	const shards = 5
	var ms []*member
	for id := int32(1); id <= 3; id++ {
		ms = append(ms, s.mustJoin(id, shards))
	}
	s.eventually(func() bool { return s.agreed(ms, shards) }, "one leader per shard, which every member names")
	s.noOverlaps()
}

func testLogAppendAndFollow(s *suite) {
	const shards = 2
	ms := []*member{s.mustJoin(1, shards), s.mustJoin(2, shards)}
	s.eventually(func() bool { return s.agreed(ms, shards) }, "one leader per shard")
	for i, leader := range s.leaders(ms, shards) {
		log, _ := leader.led(i)
		other := ms[0]
		if other == leader {
			other = ms[1]
		}
		follower, err := other.conn.OpenLog(s.t.Context(), i)
		require.NoError(s.t, err)
		from := follower.End()
		woke := make(chan error, 1)
		go func() {
			end, err := follower.Wait(s.t.Context(), from)
			if err == nil && end <= from {
				err = fmt.Errorf("Wait(%d) returned end %d", from, end)
			}
			woke <- err
		}()
		var offsets []int64
		for _, e := range []string{"a", "b", "c"} {
			r := <-log.Append([]byte(e))
			require.NoError(s.t, r.Err, "shard %d: the leader's log takes appends", i)
			offsets = append(offsets, r.Offset)
		}
		require.Equal(s.t, []int64{from, from + 1, from + 2}, offsets, "offsets follow on")
		select {
		case err := <-woke:
			require.NoError(s.t, err, "a follower's Wait wakes at an append")
		case <-time.After(backendBound):
			s.t.Fatalf("shard %d: a follower's Wait did not wake", i)
		}
		var got []string
		s.eventually(func() bool {
			got = got[:0]
			require.NoError(s.t, follower.Read(s.t.Context(), from, func(_ int64, e []byte) error { got = append(got, string(e)); return nil }))
			return len(got) == 3
		}, "a follower reads shard %d's entries", i)
		require.Equal(s.t, []string{"a", "b", "c"}, got)
		require.NoError(s.t, follower.Close())
	}
	s.eventually(func() bool { return ms[0].appended.Load() > 0 && ms[1].appended.Load() > 0 }, "appends call Appended on every member")
}

func testCloseGivesUpLeadership(s *suite) {
	const shards = 2
	ms := []*member{s.mustJoin(1, shards), s.mustJoin(2, shards)}
	s.eventually(func() bool { return s.agreed(ms, shards) }, "one leader per shard")
	leaders := s.leaders(ms, shards)
	gone := leaders[0]
	stays := ms[0]
	if stays == gone {
		stays = ms[1]
	}
	var logs []metalog.Log
	for i, l := range leaders {
		if l == gone {
			log, _ := gone.led(i)
			logs = append(logs, log)
		}
	}
	for _, log := range logs {
		c, ok := log.(metalog.Confirmer)
		require.True(s.t, ok, "a leader's log is a metalog.Confirmer")
		require.NoError(s.t, c.Confirm(s.t.Context()), "a leader confirms its leadership")
		ld, ok := log.(metalog.Leased)
		require.True(s.t, ok, "a leader's log is a metalog.Leased")
		require.True(s.t, ld.LeaseHeld(), "a leader's lease is held")
	}
	require.NoError(s.t, gone.node.Close())
	gone.mu.Lock()
	require.Empty(s.t, gone.logs, "Close returned with leaderships not given up (Unlead)")
	gone.mu.Unlock()
	for _, log := range logs {
		require.Error(s.t, appendOne(s.t, log, []byte("after Close")), "a closed Node's log takes no appends")
		require.ErrorIs(s.t, log.(metalog.Confirmer).Confirm(s.t.Context()), metalog.ErrFenced, "nor confirms a leadership")
	}
	s.eventually(func() bool {
		if !slices.Equal(ids(stays.node.Members()), []int32{stays.id}) {
			return false
		}
		for i := range shards {
			if _, ok := stays.led(i); !ok {
				return false
			}
			if m, ok := stays.node.Leader(i); !ok || m.ID != stays.id {
				return false
			}
		}
		return true
	}, "the member left leads every shard, and sees itself alone")
	s.noOverlaps()
}

func testUnhealthy(s *suite) {
	mb := s.mustJoin(1, 1)
	s.eventually(func() bool { _, ok := mb.led(0); return ok }, "the member leads")
	mb.unhealthy.Store(1)
	s.eventually(func() bool {
		_, ok := mb.led(0)
		return ok && mb.count(mb.unleads, 0) >= 1 && mb.count(mb.leads, 0) >= 2
	}, "a shard that is not healthy is given up and led again")
}

func testFeatures(s *suite) {
	const f, g = "clustertest.version", "clustertest.other"
	levels := func(mb *member) map[string]int { return mb.node.Features().Levels }
	old, err := s.join(cluster.Member{ID: 1}, 1) // a release before features: level 1 of each
	require.NoError(s.t, err)
	require.Empty(s.t, levels(old), "a broker that advertises no features finalizes none")
	upgraded, err := s.join(cluster.Member{ID: 2, Features: map[string]int{f: 2, g: 2}}, 1)
	require.NoError(s.t, err)
	require.Equal(s.t, map[string]int{f: 1, g: 1}, levels(upgraded), "finalized at the lowest level of the live members")
	s.eventually(func() bool { return maps.Equal(levels(old), map[string]int{f: 1, g: 1}) }, "every member sees the levels")

	err = upgraded.node.UpdateFeatures(s.t.Context(), map[string]int{f: 2}, false)
	require.Equal(s.t, kafkaerr.InvalidUpdateVersion, kafkaerr.CodeOf(err), "a level a member does not support: %v", err)
	require.Equal(s.t, map[string]int{f: 1, g: 1}, levels(upgraded), "nothing changed")

	require.NoError(s.t, old.node.Close())
	epoch := upgraded.node.Features().Epoch
	require.NoError(s.t, upgraded.node.UpdateFeatures(s.t.Context(), map[string]int{f: 2}, true), "validate only")
	require.Equal(s.t, map[string]int{f: 1, g: 1}, levels(upgraded), "validate only changes nothing")
	require.NoError(s.t, upgraded.node.UpdateFeatures(s.t.Context(), map[string]int{f: 2}, false))
	s.eventually(func() bool { return levels(upgraded)[f] == 2 && upgraded.node.Features().Epoch > epoch }, "the level raised, the epoch grown")

	for _, bad := range []map[string]int{{f: 1}, {"clustertest.no-such-feature": 1}, {f: 3}, {g: 2, "clustertest.no-such-feature": 1}, {g: 2, f: 3}} {
		err := upgraded.node.UpdateFeatures(s.t.Context(), bad, false)
		require.Equal(s.t, kafkaerr.InvalidUpdateVersion, kafkaerr.CodeOf(err), "%v: %v", bad, err)
	}
	require.Equal(s.t, map[string]int{f: 2, g: 1}, levels(upgraded), "refused updates change nothing, all or none")

	_, err = s.join(cluster.Member{ID: 3, Features: map[string]int{f: 1, g: 2}}, 1)
	require.Equal(s.t, kafkaerr.InvalidUpdateVersion, kafkaerr.CodeOf(err), "a broker below a finalized level: %v", err)
	_, err = s.join(cluster.Member{ID: 4}, 1)
	require.Equal(s.t, kafkaerr.InvalidUpdateVersion, kafkaerr.CodeOf(err), "a broker of a release before features: %v", err)
	newer, err := s.join(cluster.Member{ID: 5, Features: map[string]int{f: 2, g: 1}}, 1)
	require.NoError(s.t, err)
	require.Equal(s.t, map[string]int{f: 2, g: 1}, levels(newer), "a joining broker reads the levels")
	err = upgraded.node.UpdateFeatures(s.t.Context(), map[string]int{g: 2}, false)
	require.Equal(s.t, kafkaerr.InvalidUpdateVersion, kafkaerr.CodeOf(err), "a level a member that joined since does not support: %v", err)
	s.eventually(func() bool { return slices.Equal(ids(upgraded.node.Members()), []int32{2, 5}) }, "the refused brokers left")
}
