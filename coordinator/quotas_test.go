package coordinator

import (
	"context"
	"maps"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"
	"pgregory.net/rapid"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/coordinator/state"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/quota"
)

var (
	qDefault  = quota.Component{Set: true, Default: true}
	qAlice    = quota.Entity{User: qNamed("alice")}
	qAliceApp = quota.Entity{User: qNamed("alice"), ClientID: qNamed("app")}
	qAnyUser  = quota.Entity{User: qDefault}
	qOneIP    = quota.Entity{IP: qNamed("10.0.0.1")}
)

func qNamed(n string) quota.Component { return quota.Component{Set: true, Name: n} }

func qSet(key string, v float64) quota.Change { return quota.Change{Key: key, Value: v} }

func qRemove(key string) quota.Change { return quota.Change{Key: key, Remove: true} }

// mustQuotas returns s's whole client quota state.
func mustQuotas(t testing.TB, s *Coordinator) ClientQuotasState {
	t.Helper()
	st, err := s.ClientQuotas(t.Context(), -1)
	require.NoError(t, err)
	require.True(t, st.Changed)
	return st
}

// describe returns the quotas filter matches, by entity.
func describeQuotas(t testing.TB, s *Coordinator, f quota.Filter) map[quota.Entity]map[string]float64 {
	t.Helper()
	qs, err := s.DescribeClientQuotas(t.Context(), f)
	require.NoError(t, err)
	out := map[quota.Entity]map[string]float64{}
	for _, q := range qs {
		out[q.Entity] = q.Values
	}
	return out
}

// TestClientQuotas: values are set, replaced and removed per entity
// with one answer per entry and Kafka's codes; an entry with an error
// changes nothing, the others do; validateOnly answers and changes
// nothing; DescribeClientQuotas filters as Kafka's; Version grows with
// every change, apart from the security Version, and a poll at the
// current Version gets no list; everything survives a restart (the
// database) and a restart with the database gone (the log replayed).
func TestClientQuotas(t *testing.T) {
	ctx := t.Context()
	f := newShardsFixture(t, 2, memblob.OpenBucket(nil), nil)
	empty, err := f.s.ClientQuotas(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, ClientQuotasState{}, empty, "nothing yet: version 0, unchanged")
	require.Equal(t, []quota.Quota{}, mustQuotas(t, f.s).Quotas)

	errs, err := f.s.AlterClientQuotas(ctx, []quota.Alteration{
		{Entity: qAlice, Changes: []quota.Change{qSet(quota.ProducerByteRate, 1024), qSet(quota.RequestPercentage, 12.5)}},
		{Entity: qAliceApp, Changes: []quota.Change{qSet(quota.ConsumerByteRate, 2048)}},
		{Entity: qAnyUser, Changes: []quota.Change{qSet(quota.ProducerByteRate, 512)}},
		{Entity: qOneIP, Changes: []quota.Change{qSet(quota.ConnectionCreationRate, 10)}},
	}, false)
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil, nil, nil}, errs)
	st := mustQuotas(t, f.s)
	require.Equal(t, []quota.Quota{
		{Entity: qOneIP, Values: map[string]float64{quota.ConnectionCreationRate: 10}},
		{Entity: qAnyUser, Values: map[string]float64{quota.ProducerByteRate: 512}},
		{Entity: qAlice, Values: map[string]float64{quota.ProducerByteRate: 1024, quota.RequestPercentage: 12.5}},
		{Entity: qAliceApp, Values: map[string]float64{quota.ConsumerByteRate: 2048}},
	}, st.Quotas, "ordered by quota.CompareEntities")
	v1 := st.Version
	require.Equal(t, int64(5), v1, "one record per value")
	same, err := f.s.ClientQuotas(ctx, v1)
	require.NoError(t, err)
	require.Equal(t, ClientQuotasState{Version: v1}, same, "a poll at the current version")
	require.Zero(t, mustSecurity(t, f.s).Version, "the security version is apart")

	// The filters: exact, default, any; strict.
	user := func(m quota.Match, name string) quota.FilterComponent {
		return quota.FilterComponent{Type: quota.TypeUser, Match: m, Name: name}
	}
	require.Len(t, describeQuotas(t, f.s, quota.Filter{}), 4)
	require.Equal(t, []quota.Entity{qAlice, qAliceApp}, quotaEntities(describeQuotas(t, f.s, quota.Filter{Components: []quota.FilterComponent{user(quota.MatchExact, "alice")}})))
	require.Equal(t, []quota.Entity{qAlice}, quotaEntities(describeQuotas(t, f.s, quota.Filter{Components: []quota.FilterComponent{user(quota.MatchExact, "alice")}, Strict: true})))
	require.Equal(t, []quota.Entity{qAnyUser}, quotaEntities(describeQuotas(t, f.s, quota.Filter{Components: []quota.FilterComponent{user(quota.MatchDefault, "")}})))
	require.Equal(t, []quota.Entity{qAnyUser, qAlice, qAliceApp}, quotaEntities(describeQuotas(t, f.s, quota.Filter{Components: []quota.FilterComponent{user(quota.MatchAny, "")}})))
	require.Equal(t, []quota.Entity{qOneIP}, quotaEntities(describeQuotas(t, f.s, quota.Filter{Components: []quota.FilterComponent{{Type: quota.TypeIP, Match: quota.MatchAny}}})))
	_, err = f.s.DescribeClientQuotas(ctx, quota.Filter{Components: []quota.FilterComponent{{Type: "group"}}})
	require.Equal(t, kafkaerr.UnsupportedVersion, code(err))
	_, err = f.s.DescribeClientQuotas(ctx, quota.Filter{Components: []quota.FilterComponent{user(quota.MatchAny, ""), {Type: quota.TypeIP, Match: quota.MatchAny}}})
	require.Equal(t, kafkaerr.InvalidRequest, code(err))

	// Errors: nothing logged for the entries that have one; the others
	// are applied.
	end := func() int64 { c, err := f.s.local(0); require.NoError(t, err); return c.log.End() }
	before := end()
	bad := []quota.Alteration{
		{Entity: quota.Entity{}, Changes: []quota.Change{qSet(quota.ProducerByteRate, 1)}},
		{Entity: quota.Entity{User: qNamed("")}, Changes: []quota.Change{qSet(quota.ProducerByteRate, 1)}},
		{Entity: quota.Entity{User: qNamed("bob"), IP: qDefault}, Changes: []quota.Change{qSet(quota.ProducerByteRate, 1)}},
		{Entity: quota.Entity{IP: qNamed("not-an-ip")}, Changes: []quota.Change{qSet(quota.ConnectionCreationRate, 1)}},
		{Entity: qAlice, Changes: []quota.Change{qSet(quota.ProducerByteRate, 1), qSet("bogus", 1)}},
		{Entity: qAliceApp, Changes: []quota.Change{qSet(quota.ConsumerByteRate, 0)}},
		{Entity: qAnyUser, Changes: []quota.Change{qSet(quota.ProducerByteRate, 1.5), qRemove(quota.ProducerByteRate)}},
		{Entity: qOneIP, Changes: []quota.Change{qSet(quota.ProducerByteRate, 10)}},
		{Entity: quota.Entity{ClientID: qNamed("c")}, Changes: []quota.Change{qSet(quota.RequestPercentage, math.NaN())}},
	}
	errs, err = f.s.AlterClientQuotas(ctx, bad, false)
	require.NoError(t, err)
	for i, e := range errs {
		require.Equal(t, kafkaerr.InvalidRequest, code(e), "entry %d: %v", i, e)
	}
	require.Equal(t, before, end(), "nothing logged")
	require.Equal(t, st, mustQuotas(t, f.s))

	// An entity in two entries is refused in both; another entry goes
	// through.
	errs, err = f.s.AlterClientQuotas(ctx, []quota.Alteration{
		{Entity: qAlice, Changes: []quota.Change{qRemove(quota.ProducerByteRate)}},
		{Entity: qOneIP, Changes: []quota.Change{qSet(quota.ConnectionCreationRate, 20)}},
		{Entity: qAlice, Changes: []quota.Change{qSet(quota.ProducerByteRate, 1)}},
	}, false)
	require.NoError(t, err)
	require.Equal(t, []kafkaerr.Code{kafkaerr.InvalidRequest, 0, kafkaerr.InvalidRequest}, codes(errs))
	require.Equal(t, map[string]float64{quota.ConnectionCreationRate: 20}, describeQuotas(t, f.s, quota.Filter{})[qOneIP])
	require.Equal(t, 1024.0, describeQuotas(t, f.s, quota.Filter{})[qAlice][quota.ProducerByteRate])

	// validateOnly: the same answers, nothing changed or logged.
	before = end()
	st = mustQuotas(t, f.s)
	errs, err = f.s.AlterClientQuotas(ctx, []quota.Alteration{
		{Entity: qAlice, Changes: []quota.Change{qRemove(quota.ProducerByteRate), qSet(quota.ConsumerByteRate, 99)}},
		{Entity: qAliceApp, Changes: []quota.Change{qSet(quota.ConsumerByteRate, -1)}},
	}, true)
	require.NoError(t, err)
	require.Equal(t, []kafkaerr.Code{0, kafkaerr.InvalidRequest}, codes(errs))
	require.Equal(t, before, end(), "validate only: nothing logged")
	require.Equal(t, st, mustQuotas(t, f.s))

	// Setting a value to what it is, or removing one the entity has
	// not, logs nothing; a removal of the last value removes the entity.
	errs, err = f.s.AlterClientQuotas(ctx, []quota.Alteration{
		{Entity: qAlice, Changes: []quota.Change{qSet(quota.ProducerByteRate, 1024), qRemove(quota.ConsumerByteRate)}},
	}, false)
	require.NoError(t, err)
	require.Equal(t, []error{nil}, errs)
	require.Equal(t, st, mustQuotas(t, f.s))
	errs, err = f.s.AlterClientQuotas(ctx, []quota.Alteration{
		{Entity: qAlice, Changes: []quota.Change{qSet(quota.ProducerByteRate, 4096), qRemove(quota.RequestPercentage)}},
		{Entity: qAliceApp, Changes: []quota.Change{qRemove(quota.ConsumerByteRate)}},
	}, false)
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil}, errs)
	want := mustQuotas(t, f.s)
	require.Equal(t, st.Version+3, want.Version)
	got := describeQuotas(t, f.s, quota.Filter{})
	require.Equal(t, map[string]float64{quota.ProducerByteRate: 4096}, got[qAlice])
	require.NotContains(t, got, qAliceApp)

	f.restart()
	require.Equal(t, want, mustQuotas(t, f.s), "from the database")
	require.NoError(t, f.s.Close())
	for _, name := range []string{"shard-0.db", "shard-0.db-wal", "shard-0.db-shm"} {
		require.NoError(t, removeIfExists(f.dir+"/"+name))
	}
	f.open()
	require.Equal(t, want, mustQuotas(t, f.s), "from the log")
}

// quotaEntities returns the entities of m, ordered by quota.CompareEntities.
func quotaEntities(m map[quota.Entity]map[string]float64) []quota.Entity {
	var out []quota.Entity
	for _, e := range []quota.Entity{qOneIP, qAnyUser, qAlice, qAliceApp} {
		if _, ok := m[e]; ok {
			out = append(out, e)
		}
	}
	if len(out) != len(m) {
		panic("quotaEntities: an entity the test does not know")
	}
	return out
}

// TestClientQuotasSnapshot: the quotas survive a snapshot and the log
// trimmed before it, at the leader and at a follower.
func TestClientQuotasSnapshot(t *testing.T) {
	ctx := t.Context()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	log := newTestLog()
	dir := t.TempDir()
	opts := &Options{Dir: dir, Bucket: bucket, Prefix: "p/", ApplyInterval: -1, SnapshotEvery: -1, OrphanInterval: -1, Lifecycle: LifecycleOptions{Interval: -1}}
	s, err := Open(ctx, []metalog.Log{log}, opts)
	require.NoError(t, err)
	errs, err := s.AlterClientQuotas(ctx, []quota.Alteration{
		{Entity: qAliceApp, Changes: []quota.Change{qSet(quota.ProducerByteRate, 1<<20)}},
		{Entity: quota.Entity{IP: qDefault}, Changes: []quota.Change{qSet(quota.ConnectionCreationRate, 50)}},
	}, false)
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil}, errs)
	c0, err := s.local(0)
	require.NoError(t, err)
	_, err = c0.Snapshot(ctx)
	require.NoError(t, err)
	require.Positive(t, log.Start(), "trimmed")
	want := mustQuotas(t, s)
	require.Equal(t, int64(2), want.Version)
	require.NoError(t, s.Close())
	require.NoError(t, os.RemoveAll(dir))

	s, err = Open(ctx, []metalog.Log{log}, opts)
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, want, mustQuotas(t, s), "restored from the snapshot")

	f, err := OpenFollower(ctx, log.Writer(), &FollowerOptions{Options: Options{Dir: t.TempDir(), Bucket: bucket, Prefix: "p/"}})
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, want, f.c.pub.Quotas.Load().State(-1), "a follower from the snapshot")
}

// TestClientQuotasForwarded: a broker that does not lead shard 0 changes
// and reads quotas through its Forwarder (no follower: every read
// forwarded), with the leader's answers and codes; with a follower of
// shard 0, it reads its own change at once and a change made at the
// leader once its follower applied it.
func TestClientQuotasForwarded(t *testing.T) {
	ctx := t.Context()
	log := newTestLog()
	lead, err := Open(ctx, []metalog.Log{log}, &Options{Dir: t.TempDir(), ApplyInterval: -1, SnapshotEvery: -1})
	require.NoError(t, err)
	defer lead.Close()
	for _, withFollower := range []bool{false, true} {
		opts := &Options{Dir: t.TempDir(), Forwarder: direct{lead}, ApplyInterval: -1, SnapshotEvery: -1}
		if withFollower {
			opts.FollowerLog = func(context.Context, int) (metalog.Log, error) { return log.Writer(), nil }
		}
		other, err := Open(ctx, []metalog.Log{nil}, opts)
		require.NoError(t, err)
		defer other.Close()
		if withFollower {
			require.Eventually(t, func() bool { _, f := other.follower(0); return f != nil }, 10*time.Second, time.Millisecond)
		}
		require.Equal(t, mustQuotas(t, lead), mustQuotas(t, other), "the same, forwarded or not")
		user := quota.Entity{User: qNamed("alice")}
		if withFollower {
			user = quota.Entity{User: qNamed("bob")}
		}
		errs, err := other.AlterClientQuotas(ctx, []quota.Alteration{
			{Entity: user, Changes: []quota.Change{qSet(quota.ProducerByteRate, 100)}},
			{Entity: qOneIP, Changes: []quota.Change{qSet(quota.ProducerByteRate, 100)}},
		}, false)
		require.NoError(t, err)
		require.Equal(t, []kafkaerr.Code{0, kafkaerr.InvalidRequest}, codes(errs))
		require.Equal(t, map[string]float64{quota.ProducerByteRate: 100}, describeQuotas(t, other, quota.Filter{})[user], "read at once where it was made")
		st := mustQuotas(t, other)
		require.Equal(t, mustQuotas(t, lead), st)
		unchanged, err := other.ClientQuotas(ctx, st.Version)
		require.NoError(t, err)
		require.Equal(t, ClientQuotasState{Version: st.Version}, unchanged)

		// A change made at the leader is seen here.
		_, err = lead.AlterClientQuotas(ctx, []quota.Alteration{{Entity: user, Changes: []quota.Change{qSet(quota.ConsumerByteRate, 7)}}}, false)
		require.NoError(t, err)
		want := mustQuotas(t, lead)
		require.Eventually(t, func() bool {
			got, err := other.ClientQuotas(ctx, st.Version)
			return err == nil && got.Changed && got.Version == want.Version
		}, 10*time.Second, time.Millisecond)
		require.Equal(t, want, mustQuotas(t, other))

		// Validate only, forwarded.
		errs, err = other.AlterClientQuotas(ctx, []quota.Alteration{{Entity: user, Changes: []quota.Change{qRemove(quota.ConsumerByteRate)}}}, true)
		require.NoError(t, err)
		require.Equal(t, []error{nil}, errs)
		require.Equal(t, want, mustQuotas(t, other))

		forwarded := other.stats.forwarded.Load()
		mustQuotas(t, other)
		if withFollower {
			require.Equal(t, forwarded, other.stats.forwarded.Load(), "read from the follower")
		} else {
			require.Equal(t, forwarded+1, other.stats.forwarded.Load(), "read from the leader")
		}
	}
}

// sampleQuotaEntries are entries of the quota records, for the golden
// file, the round trip and the fuzzer's seeds.
func sampleQuotaEntries() [][]byte {
	return [][]byte{
		state.AppendEntry(nil, state.Entry{Epoch: 15, Prev: 0x9001, Records: []state.Record{
			state.QuotaSetRecord{QuotaKey: state.QuotaKey{Entity: qAlice, Key: quota.ProducerByteRate}, Value: 1 << 20},
			state.QuotaSetRecord{QuotaKey: state.QuotaKey{Entity: quota.Entity{User: qDefault, ClientID: qNamed("app")}, Key: quota.RequestPercentage}, Value: 12.5},
			state.QuotaSetRecord{QuotaKey: state.QuotaKey{Entity: quota.Entity{IP: qNamed("fe80::1")}, Key: quota.ConnectionCreationRate}, Value: 30},
			state.QuotaRemoveRecord{QuotaKey: state.QuotaKey{Entity: qAlice, Key: quota.ProducerByteRate}},
		}}),
		state.AppendEntry(nil, state.Entry{Epoch: 15, Records: []state.Record{
			state.QuotaRemoveRecord{QuotaKey: state.QuotaKey{Entity: quota.Entity{IP: qDefault}, Key: quota.ConnectionCreationRate}},
			state.QuotaSetRecord{QuotaKey: state.QuotaKey{Entity: quota.Entity{ClientID: qDefault}, Key: quota.ControllerMutationRate}, Value: 0.25},
		}}),
	}
}

// TestQuotaEntryGolden: the quota records, byte for byte, are in
// testdata/entries-quotas.golden; -update rewrites it. They round-trip;
// values the leader never writes do not decode.
func TestQuotaEntryGolden(t *testing.T) {
	checkGolden(t, "entries-quotas.golden", sampleQuotaEntries())
	k := state.QuotaKey{Entity: qAlice, Key: quota.ProducerByteRate}
	with := func(e quota.Entity, key string) state.QuotaKey { return state.QuotaKey{Entity: e, Key: key} }
	for _, r := range []state.Record{
		state.QuotaSetRecord{QuotaKey: k},
		state.QuotaSetRecord{QuotaKey: k, Value: -1},
		state.QuotaSetRecord{QuotaKey: k, Value: math.NaN()},
		state.QuotaSetRecord{QuotaKey: k, Value: math.Inf(1)},
		state.QuotaSetRecord{QuotaKey: with(qAlice, ""), Value: 1},
		state.QuotaSetRecord{QuotaKey: with(quota.Entity{}, quota.ProducerByteRate), Value: 1},
		state.QuotaRemoveRecord{QuotaKey: with(quota.Entity{User: qNamed("")}, quota.ProducerByteRate)},
		state.QuotaRemoveRecord{QuotaKey: with(quota.Entity{User: qDefault, IP: qDefault}, quota.ProducerByteRate)},
	} {
		_, err := state.DecodeEntry(state.AppendEntry(nil, state.Entry{Records: []state.Record{r}}))
		require.ErrorIs(t, err, ErrCorruptEntry, "%+v", r)
	}
	// An unknown component kind.
	b := state.AppendEntry(nil, state.Entry{Records: []state.Record{state.QuotaRemoveRecord{QuotaKey: k}}})
	i := state.EntryHeaderSize + 3 // count, type, length: the user's kind
	require.Equal(t, byte(2), b[i])
	b[i] = 3
	_, err := state.DecodeEntry(fixEntryCRC(b))
	require.ErrorIs(t, err, ErrCorruptEntry)
}

// TestClientQuotasModel runs random quota changes against a shard and a
// model (the values by entity and key, and the Version counting the
// records each change needs), with restarts and rebuilds from the log,
// and requires that they agree: the state and its Version. (Which
// entries are valid is the state model test's; here the model takes
// quota.Alteration.Validate's word, and checks what is kept.)
func TestClientQuotasModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		log := newTestLog()
		dir, err := os.MkdirTemp("", "quota-model-")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		open := func() *leader {
			c, err := openLeader(ctx, log, &leaderOptions{Dir: dir, SnapshotEvery: -1, ApplyInterval: -1})
			if err != nil {
				rt.Fatal(err)
			}
			return c
		}
		c := open()
		defer func() { c.Close() }()
		values := map[state.QuotaKey]float64{}
		version := int64(0)
		entities := []quota.Entity{qAlice, qAliceApp, qAnyUser, qOneIP, {ClientID: qDefault}, {IP: qDefault}, {User: qNamed("")}}
		keys := []string{quota.ProducerByteRate, quota.RequestPercentage, quota.ConnectionCreationRate}
		rt.Repeat(map[string]func(*rapid.T){
			"alter": func(rt *rapid.T) {
				var entries []quota.Alteration
				for range rapid.IntRange(1, 3).Draw(rt, "entries") {
					a := quota.Alteration{Entity: rapid.SampledFrom(entities).Draw(rt, "entity")}
					for range rapid.IntRange(1, 2).Draw(rt, "changes") {
						a.Changes = append(a.Changes, quota.Change{Key: rapid.SampledFrom(keys).Draw(rt, "key"),
							Value: rapid.SampledFrom([]float64{10, 20, 0.5}).Draw(rt, "value"), Remove: rapid.Bool().Draw(rt, "remove")})
					}
					entries = append(entries, a)
				}
				validateOnly := rapid.IntRange(0, 3).Draw(rt, "validateOnly") == 0
				errs, err := c.AlterClientQuotas(ctx, entries, validateOnly)
				if err != nil {
					rt.Fatal(err)
				}
				for i, a := range entries {
					n := 0
					for _, b := range entries {
						if b.Entity == a.Entity {
							n++
						}
					}
					want := a.Validate()
					if n > 1 {
						want = kafkaerr.New(kafkaerr.InvalidRequest, "duplicate")
					}
					if code(want) != code(errs[i]) {
						rt.Fatalf("entry %d of %+v: %v, want %v", i, entries, errs[i], want)
					}
					if want != nil || validateOnly {
						continue
					}
					for _, ch := range a.Changes {
						k := state.QuotaKey{Entity: a.Entity, Key: ch.Key}
						old, has := values[k]
						switch {
						case ch.Remove && has:
							delete(values, k)
							version++
						case !ch.Remove && (!has || old != ch.Value):
							values[k] = ch.Value
							version++
						}
					}
				}
			},
			"restart": func(rt *rapid.T) {
				c.Close()
				c = open()
			},
			"rebuild": func(rt *rapid.T) {
				c.Close()
				for _, name := range []string{"shard-0.db", "shard-0.db-wal", "shard-0.db-shm"} {
					if err := removeIfExists(filepath.Join(dir, name)); err != nil {
						rt.Fatal(err)
					}
				}
				c = open()
			},
			"": func(rt *rapid.T) {
				st := c.pub.Quotas.Load().State(-1)
				if st.Version != version {
					rt.Fatalf("version %d, want %d", st.Version, version)
				}
				got := map[state.QuotaKey]float64{}
				for _, q := range st.Quotas {
					if len(q.Values) == 0 {
						rt.Fatalf("an entity without values: %+v", q.Entity)
					}
					for k, v := range q.Values {
						got[state.QuotaKey{Entity: q.Entity, Key: k}] = v
					}
				}
				if !maps.Equal(got, values) {
					rt.Fatalf("quotas %v, want %v", got, values)
				}
			},
		})
	})
}
