package kafkaserver

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
)

// TestTopicConfigs: every Kafka 4 topic config is accepted at creation
// with a valid value and refused with INVALID_CONFIG naming it with an
// invalid one; DescribeConfigs shows the set ones as DYNAMIC_TOPIC_CONFIG
// and the others as DEFAULT_CONFIG with their broker synonyms;
// AlterConfigs and IncrementalAlterConfigs change the configs, those the
// facade implements there too, refuse a change of
// message.timestamp.type, and everything survives a restart.
func TestTopicConfigs(t *testing.T) {
	p := startBroker(t, nil)
	adm := kadm.NewClient(p.client(t))
	ctx := t.Context()

	// Every config at a valid value other than its default, where it has
	// one (compression.type takes only producer here).
	valid := map[string]string{
		"cleanup.policy": "compact", "compression.gzip.level": "5", "compression.lz4.level": "3", "compression.type": "producer",
		"compression.zstd.level": "7", "delete.retention.ms": "1000", "file.delete.delay.ms": "1", "flush.messages": "10",
		"flush.ms": "1000", "follower.replication.throttled.replicas": "0:0", "index.interval.bytes": "100",
		"leader.replication.throttled.replicas": "*", "local.retention.bytes": "1000", "local.retention.ms": "1000",
		"max.compaction.lag.ms": "100000", "max.message.bytes": "2000000", "message.timestamp.after.max.ms": "1000",
		"message.timestamp.before.max.ms": "1000", "message.timestamp.type": "LogAppendTime", "min.cleanable.dirty.ratio": "0.25",
		"min.compaction.lag.ms": "10", "min.insync.replicas": "2", "preallocate": "true", "remote.log.copy.disable": "true",
		"remote.log.delete.on.disable": "true", "remote.storage.enable": "true", "retention.bytes": "1000000",
		"retention.ms": "3600000", "segment.bytes": "1048576", "segment.index.bytes": "4096", "segment.jitter.ms": "5",
		"segment.ms": "60000", "unclean.leader.election.enable": "true",
	}
	require.Len(t, valid, len(kafkaTopicConfigs), "a value for every config")
	cfgs := map[string]*string{}
	for k, v := range valid {
		cfgs[k] = &v
	}
	created, _ := adm.CreateTopic(ctx, 1, -1, cfgs, "all")
	require.NoError(t, created.Err, created.ErrMessage)
	_, err := adm.CreateTopic(ctx, 1, -1, nil, "plain")
	require.NoError(t, err)

	for name, value := range map[string]string{
		"min.cleanable.dirty.ratio": "1.5", "segment.bytes": "1000", "retention.ms": "soon", "compression.type": "gzip",
		"cleanup.policy": "compact,tidy", "preallocate": "maybe", "leader.replication.throttled.replicas": "x", "no.such.config": "1",
	} {
		v := value
		r, _ := adm.CreateTopic(ctx, 1, -1, map[string]*string{name: &v}, "bad")
		require.ErrorIs(t, r.Err, kerr.InvalidConfig, name)
		require.Contains(t, r.ErrMessage, name)
	}

	describe := func(topic string) map[string]*kadm.Config {
		t.Helper()
		rc, err := adm.DescribeTopicConfigs(ctx, topic)
		require.NoError(t, err)
		r, err := rc.On(topic, nil)
		require.NoError(t, err)
		require.NoError(t, r.Err)
		out := map[string]*kadm.Config{}
		for i := range r.Configs {
			out[r.Configs[i].Key] = &r.Configs[i]
		}
		return out
	}
	check := func() {
		t.Helper()
		all := describe("all")
		require.Len(t, all, len(kafkaTopicConfigs))
		for k, v := range valid {
			require.Equal(t, v, all[k].MaybeValue(), k)
			require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, all[k].Source, k)
		}
		plain := describe("plain")
		require.Equal(t, "0.5", plain["min.cleanable.dirty.ratio"].MaybeValue())
		require.Equal(t, kmsg.ConfigSourceDefaultConfig, plain["min.cleanable.dirty.ratio"].Source)
		require.Equal(t, "604800000", plain["retention.ms"].MaybeValue())
		require.Len(t, plain["retention.ms"].Synonyms, 1)
		require.Equal(t, "log.retention.hours", plain["retention.ms"].Synonyms[0].Key)
		require.Equal(t, "168", *plain["retention.ms"].Synonyms[0].Value)
		require.Equal(t, "retention.ms", all["retention.ms"].Synonyms[0].Key, "the topic's own value first")
	}
	check()
	ts, err := p.b.DescribeTopics(ctx)
	require.NoError(t, err)
	for _, d := range ts {
		if d.Name == "all" {
			c := d.Config
			require.Equal(t, []any{time.Second, 10 * time.Millisecond, 100 * time.Second, 0.25},
				[]any{c.DeleteRetention, c.MinCompactionLag, c.MaxCompactionLag, c.MinCleanableDirtyRatio}, "the compaction settings reach the facade")
		}
	}

	// IncrementalAlterConfigs: SET and DELETE of configs the facade
	// does not implement; APPEND to a list; a change of retention.ms
	// refused; validate-only changes nothing.
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "min.cleanable.dirty.ratio", Value: ptr("0.75")},
		{Op: kadm.DeleteConfig, Name: "flush.ms"},
		{Op: kadm.AppendConfig, Name: "leader.replication.throttled.replicas", Value: ptr("1:0")},
	}, "plain")
	require.NoError(t, err)
	require.NoError(t, resps[0].Err)
	plain := describe("plain")
	require.Equal(t, "0.75", plain["min.cleanable.dirty.ratio"].MaybeValue())
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, plain["min.cleanable.dirty.ratio"].Source)
	require.Equal(t, "1:0", plain["leader.replication.throttled.replicas"].MaybeValue())
	resps, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: ptr("1000")},
		{Op: kadm.SetConfig, Name: "delete.retention.ms", Value: ptr("0")}}, "plain")
	require.NoError(t, err)
	require.NoError(t, resps[0].Err, "the facade's configs change too")
	plainTopic := func() diskless.TopicConfig {
		ts, err := p.b.DescribeTopics(ctx)
		require.NoError(t, err)
		for _, d := range ts {
			if d.Name == "plain" {
				return d.Config
			}
		}
		t.Fatal("no topic plain")
		return diskless.TopicConfig{}
	}
	require.Equal(t, time.Second, plainTopic().Retention)
	require.Negative(t, plainTopic().DeleteRetention, "delete.retention.ms 0: the facade's Kafka 0")
	require.Equal(t, "1000", describe("plain")["retention.ms"].MaybeValue())
	require.Equal(t, "0", describe("plain")["delete.retention.ms"].MaybeValue())
	resps, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "retention.ms"}, {Op: kadm.DeleteConfig, Name: "delete.retention.ms"}}, "plain")
	require.NoError(t, err)
	require.NoError(t, resps[0].Err)
	require.Equal(t, 7*24*time.Hour, plainTopic().Retention, "deleted: the default again")
	require.Equal(t, "604800000", describe("plain")["retention.ms"].MaybeValue())
	resps, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "message.timestamp.type", Value: ptr("LogAppendTime")}}, "plain")
	require.NoError(t, err)
	require.ErrorIs(t, resps[0].Err, kerr.InvalidConfig, "message.timestamp.type is fixed")
	resps, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "retention.ms", Value: ptr("1")}}, "plain")
	require.NoError(t, err)
	require.ErrorIs(t, resps[0].Err, kerr.InvalidConfig, "APPEND to a config that is not a list")
	resps, err = adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "preallocate", Value: ptr("true")}}, "plain")
	require.NoError(t, err)
	require.NoError(t, resps[0].Err)
	require.Equal(t, "false", describe("plain")["preallocate"].MaybeValue())

	// AlterConfigs replaces the set: what it leaves out is the default
	// again; the configs the facade fixed must stay as they are.
	resps, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "segment.jitter.ms", Value: ptr("9")}}, "plain")
	require.NoError(t, err)
	require.NoError(t, resps[0].Err)
	plain = describe("plain")
	require.Equal(t, "9", plain["segment.jitter.ms"].MaybeValue())
	require.Equal(t, "0.5", plain["min.cleanable.dirty.ratio"].MaybeValue())
	// A LogAppendTime topic keeps it when AlterConfigs leaves it out
	// (it cannot change); the rest goes back to the defaults.
	_, err = adm.CreateTopic(ctx, 1, -1, map[string]*string{"message.timestamp.type": ptr("LogAppendTime"), "retention.ms": ptr("1000")}, "stamped")
	require.NoError(t, err)
	resps, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "segment.jitter.ms", Value: ptr("9")}}, "stamped")
	require.NoError(t, err)
	require.NoError(t, resps[0].Err)
	stamped := describe("stamped")
	require.Equal(t, "LogAppendTime", stamped["message.timestamp.type"].MaybeValue())
	require.Equal(t, "604800000", stamped["retention.ms"].MaybeValue())
	// Internal topics' facade configs are the broker's.
	resps, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: ptr("delete")}}, configsTopic)
	require.NoError(t, err)
	require.ErrorIs(t, resps[0].Err, kerr.InvalidConfig, "an internal topic")
	resps, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "preallocate", Value: ptr("1")}}, "nope")
	require.NoError(t, err)
	require.ErrorIs(t, resps[0].Err, kerr.UnknownTopicOrPartition)

	p.stop()
	p = p.restart()
	adm = kadm.NewClient(p.client(t))
	check()
	require.Equal(t, "9", describe("plain")["segment.jitter.ms"].MaybeValue(), "kept across the restart")

	// A deleted topic's configs go with it.
	_, err = adm.DeleteTopics(ctx, "all")
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, 1, -1, nil, "all")
	require.NoError(t, err)
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, describe("all")["min.insync.replicas"].Source)
}

func ptr(s string) *string { return &s }

// FuzzTopicOverrides: the topic configs record decoder never panics, and
// what it decodes encodes to a record that decodes the same (the same
// bytes, when the input was in the encoder's form).
func FuzzTopicOverrides(f *testing.F) {
	f.Add(appendTopicOverrides(nil, topicOverrides{id: uuid.New(), configs: map[string]string{"retention.ms": "1", "a": ""}}))
	f.Add(appendTopicOverrides(nil, topicOverrides{}))
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := parseTopicOverrides(b)
		if err != nil {
			return
		}
		again := appendTopicOverrides(nil, o)
		o2, err := parseTopicOverrides(again)
		require.NoError(t, err)
		require.Equal(t, o.id, o2.id)
		require.Equal(t, len(o.configs), len(o2.configs))
		for k, v := range o.configs {
			require.Equal(t, v, o2.configs[k])
		}
		require.Equal(t, again, appendTopicOverrides(nil, o2), "the encoder's form is stable")
		require.LessOrEqual(t, len(again), len(b), "duplicate names only shrink it")
	})
}
