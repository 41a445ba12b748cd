package kafkaserver

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kbatch"
	"github.com/diskless-go/diskless/segment"
)

// The one table of topic configs: every topic config of Kafka 4
// (TopicConfig, LogConfig's ConfigDef) with its type, default, the broker
// configs it falls back to, how Kafka's ConfigDef validates it
// (INVALID_CONFIG naming the config and why), its documentation, and, for
// those the facade implements, how it maps to and from
// diskless.TopicConfig. CreateTopics, DescribeConfigs, AlterConfigs and
// IncrementalAlterConfigs read it (topics.go, configs.go), and the list
// in examples/kafka-broker/README.md is generated from it
// (TestTopicConfigsREADME).
//
// It lives here, not in a package of its own under the root: only the
// Kafka protocol speaks in config names and strings, and mapping them to
// the facade's TopicConfig needs the facade, which kafkaserver imports
// (the root and coordinator take typed fields and keep their own zero
// value defaults; see TopicConfig in the root's config.go).

// configDef is one Kafka topic config.
type configDef struct {
	name string
	typ  kmsg.ConfigType
	def  string // the default, as DescribeConfigs shows it
	// check validates a value and returns it as Kafka shows it, or why
	// it is invalid.
	check func(v string) (string, error)
	// synonym is the broker config it falls back to, as DescribeConfigs
	// lists it (Kafka leaves out those without a value): its default is
	// def, in hours for a name ending in ".hours".
	synonym string
	// doc is what DescribeConfigs answers as its documentation.
	doc string
	// get and set, for the configs the facade implements, read the value
	// from the facade's TopicConfig ("" for its default) and set a
	// value check accepted there; nil for the configs only stored.
	get func(diskless.TopicConfig) string
	set func(*diskless.TopicConfig, string) error
	// fixed, for a config that cannot change once the topic is created
	// (INVALID_CONFIG), says why: message.timestamp.type, as Fetch
	// stamps a LogAppendTime topic's batches as it serves them.
	fixed string
}

const maxLong = "9223372036854775807"

// maxMs is the most milliseconds a time.Duration holds.
const maxMs = math.MaxInt64 / int64(time.Millisecond)

// kafkaTopicConfigs are Kafka 4's topic configs, in name order.
var kafkaTopicConfigs = []configDef{
	{name: "cleanup.policy", typ: kmsg.ConfigTypeList, def: "delete", check: listOf("compact", "delete"),
		synonym: "log.cleanup.policy",
		doc:     "delete: segments past retention are deleted; compact: the latest record of each key is kept (TopicConfig.Compact, TopicConfig.Delete).",
		get: func(c diskless.TopicConfig) string {
			switch {
			case c.Compact && c.Delete:
				return "compact,delete"
			case c.Compact:
				return "compact"
			}
			return ""
		},
		set: func(c *diskless.TopicConfig, v string) error {
			p, err := segment.ParseCleanupPolicy(v)
			c.Compact, c.Delete = p.Compact(), p == segment.CleanupCompactDelete
			return err
		}},
	{name: "compression.gzip.level", typ: kmsg.ConfigTypeInt, def: "-1", check: gzipLevel,
		synonym: "compression.gzip.level",
		doc:     "The gzip level of a broker that recompresses; batches are stored as produced here."},
	{name: "compression.lz4.level", typ: kmsg.ConfigTypeInt, def: "9", check: intBetween(1, 17),
		synonym: "compression.lz4.level",
		doc:     "The lz4 level of a broker that recompresses; batches are stored as produced here."},
	{name: "compression.type", typ: kmsg.ConfigTypeString, def: "producer", check: producerOnly,
		synonym: "compression.type",
		doc:     "Only producer: batches are stored as produced, never recompressed."},
	{name: "compression.zstd.level", typ: kmsg.ConfigTypeInt, def: "3", check: intBetween(-131072, 22),
		synonym: "compression.zstd.level",
		doc:     "The zstd level of a broker that recompresses; batches are stored as produced here."},
	{name: "delete.retention.ms", typ: kmsg.ConfigTypeLong, def: msString(segment.DefaultDeleteRetention), check: longAtLeast(0),
		synonym: "log.cleaner.delete.retention.ms",
		doc:     "How long a compacted topic keeps tombstones and transaction markers (TopicConfig.DeleteRetention).",
		get: func(c diskless.TopicConfig) string {
			switch {
			case c.DeleteRetention < 0:
				return "0"
			case c.DeleteRetention == 0:
				return ""
			}
			return strconv.FormatInt(c.DeleteRetention.Milliseconds(), 10)
		},
		set: func(c *diskless.TopicConfig, v string) error {
			n, err := parseInt(v, 0, math.MaxInt64)
			c.DeleteRetention = msConfig(n)
			if n == 0 {
				c.DeleteRetention = -1 // the facade reads 0 as the default, negative as Kafka's 0
			}
			return err
		}},
	{name: "file.delete.delay.ms", typ: kmsg.ConfigTypeLong, def: "60000", check: longAtLeast(0),
		synonym: "log.segment.delete.delay.ms",
		doc:     "Kafka's delay before deleting a local segment file; no local files here."},
	{name: "flush.messages", typ: kmsg.ConfigTypeLong, def: maxLong, check: longAtLeast(1),
		synonym: "log.flush.interval.messages",
		doc:     "Kafka's fsync interval in messages; a produce is acknowledged once in the bucket here."},
	{name: "flush.ms", typ: kmsg.ConfigTypeLong, def: maxLong, check: longAtLeast(0),
		synonym: "log.flush.scheduler.interval.ms",
		doc:     "Kafka's fsync interval in time; a produce is acknowledged once in the bucket here."},
	{name: "follower.replication.throttled.replicas", typ: kmsg.ConfigTypeList, def: "", check: throttledReplicas,
		doc: "Replicas whose follower replication is throttled; the bucket replicates here."},
	{name: "index.interval.bytes", typ: kmsg.ConfigTypeInt, def: strconv.Itoa(segment.DefaultIndexIntervalBytes), check: intAtLeast(0),
		synonym: "log.index.interval.bytes",
		doc:     "Kafka's offset index interval of local segments."},
	{name: "leader.replication.throttled.replicas", typ: kmsg.ConfigTypeList, def: "", check: throttledReplicas,
		doc: "Replicas whose leader replication is throttled; the bucket replicates here."},
	{name: "local.retention.bytes", typ: kmsg.ConfigTypeLong, def: "-2", check: longAtLeast(-2),
		synonym: "log.local.retention.bytes",
		doc:     "Tiered storage's local retention in bytes; diskless.Config.LocalRetentionBytes is the broker's."},
	{name: "local.retention.ms", typ: kmsg.ConfigTypeLong, def: "-2", check: longAtLeast(-2),
		synonym: "log.local.retention.ms",
		doc:     "Tiered storage's local retention in time; diskless.Config.LocalRetention is the broker's."},
	{name: "max.compaction.lag.ms", typ: kmsg.ConfigTypeLong, def: maxLong, check: longAtLeast(1),
		synonym: "log.cleaner.max.compaction.lag.ms",
		doc:     "The longest a record stays uncompacted (TopicConfig.MaxCompactionLag).",
		get: func(c diskless.TopicConfig) string {
			if c.MaxCompactionLag <= 0 {
				return ""
			}
			return strconv.FormatInt(c.MaxCompactionLag.Milliseconds(), 10)
		},
		set: func(c *diskless.TopicConfig, v string) error {
			n, err := parseInt(v, 1, math.MaxInt64)
			c.MaxCompactionLag = msConfig(n)
			if n == math.MaxInt64 {
				c.MaxCompactionLag = 0 // no limit
			}
			return err
		}},
	{name: "max.message.bytes", typ: kmsg.ConfigTypeInt, def: strconv.Itoa(kbatch.DefaultMaxMessageBytes), check: intAtLeast(0),
		synonym: "message.max.bytes",
		doc:     "The largest batch a produce may write (TopicConfig.MaxMessageBytes).",
		get: func(c diskless.TopicConfig) string {
			if c.MaxMessageBytes == 0 {
				return ""
			}
			return strconv.Itoa(int(c.MaxMessageBytes))
		},
		set: func(c *diskless.TopicConfig, v string) error {
			n, err := parseInt(v, 0, math.MaxInt32)
			c.MaxMessageBytes = int32(n)
			return err
		}},
	{name: "message.timestamp.after.max.ms", typ: kmsg.ConfigTypeLong, def: "3600000", check: longAtLeast(0),
		synonym: "log.message.timestamp.after.max.ms",
		doc:     "How far ahead of the broker's clock a CreateTime timestamp may be."},
	{name: "message.timestamp.before.max.ms", typ: kmsg.ConfigTypeLong, def: maxLong, check: longAtLeast(0),
		synonym: "log.message.timestamp.before.max.ms",
		doc:     "How far behind the broker's clock a CreateTime timestamp may be."},
	{name: "message.timestamp.type", typ: kmsg.ConfigTypeString, def: "CreateTime", check: oneOf("CreateTime", "LogAppendTime"),
		synonym: "log.message.timestamp.type",
		doc:     "CreateTime or LogAppendTime (TopicConfig.LogAppendTime): a LogAppendTime topic's batches are stamped as they are read.",
		fixed:   "its batches are stamped as they are read",
		get: func(c diskless.TopicConfig) string {
			if c.LogAppendTime {
				return "LogAppendTime"
			}
			return ""
		},
		set: func(c *diskless.TopicConfig, v string) error {
			switch v {
			case "CreateTime", "LogAppendTime":
				c.LogAppendTime = v == "LogAppendTime"
				return nil
			}
			return fmt.Errorf("message.timestamp.type %q is neither CreateTime nor LogAppendTime", v)
		}},
	{name: "min.cleanable.dirty.ratio", typ: kmsg.ConfigTypeDouble, def: strconv.FormatFloat(segment.DefaultMinCleanableDirtyRatio, 'f', -1, 64), check: ratio,
		synonym: "log.cleaner.min.cleanable.ratio",
		doc:     "The dirty ratio past which a compacted partition is compacted (TopicConfig.MinCleanableDirtyRatio).",
		get: func(c diskless.TopicConfig) string {
			switch {
			case c.MinCleanableDirtyRatio < 0:
				return "0"
			case c.MinCleanableDirtyRatio == 0:
				return ""
			}
			return strconv.FormatFloat(c.MinCleanableDirtyRatio, 'f', -1, 64)
		},
		set: func(c *diskless.TopicConfig, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			switch {
			case err != nil:
				return err
			case !(f >= 0 && f <= 1):
				return fmt.Errorf("%v is outside [0, 1]", f)
			case f == 0:
				f = -1 // the facade reads 0 as the default, negative as Kafka's 0
			}
			c.MinCleanableDirtyRatio = f
			return nil
		}},
	{name: "min.compaction.lag.ms", typ: kmsg.ConfigTypeLong, def: "0", check: longAtLeast(0),
		synonym: "log.cleaner.min.compaction.lag.ms",
		doc:     "The shortest a record stays uncompacted (TopicConfig.MinCompactionLag).",
		get: func(c diskless.TopicConfig) string {
			return strconv.FormatInt(c.MinCompactionLag.Milliseconds(), 10)
		},
		set: func(c *diskless.TopicConfig, v string) error {
			n, err := parseInt(v, 0, math.MaxInt64)
			c.MinCompactionLag = msConfig(n)
			return err
		}},
	{name: "min.insync.replicas", typ: kmsg.ConfigTypeInt, def: "1", check: intAtLeast(1),
		synonym: "min.insync.replicas",
		doc:     "Kafka's in-sync replicas for acks=all; the bucket's durability is the ack here."},
	{name: "preallocate", typ: kmsg.ConfigTypeBoolean, def: "false", check: boolean,
		synonym: "log.preallocate",
		doc:     "Kafka's preallocation of local segment files."},
	{name: "remote.log.copy.disable", typ: kmsg.ConfigTypeBoolean, def: "false", check: boolean,
		doc: "Tiered storage's switch to stop copying to remote storage."},
	{name: "remote.log.delete.on.disable", typ: kmsg.ConfigTypeBoolean, def: "false", check: boolean,
		doc: "Tiered storage's deletion of remote data when disabled."},
	{name: "remote.storage.enable", typ: kmsg.ConfigTypeBoolean, def: "false", check: boolean,
		doc: "Tiered storage's switch; every topic is in the bucket here."},
	{name: "retention.bytes", typ: kmsg.ConfigTypeLong, def: "-1", check: anyLong,
		synonym: "log.retention.bytes",
		doc:     "The most bytes a partition keeps, -1 for no limit (TopicConfig.RetentionBytes).",
		get: func(c diskless.TopicConfig) string {
			if c.RetentionBytes <= 0 {
				return ""
			}
			return strconv.FormatInt(c.RetentionBytes, 10)
		},
		set: func(c *diskless.TopicConfig, v string) error {
			n, err := parseInt(v, -1, math.MaxInt64)
			c.RetentionBytes = n
			return err
		}},
	{name: "retention.ms", typ: kmsg.ConfigTypeLong, def: msString(segment.DefaultRetentionTime), check: longAtLeast(-1),
		synonym: "log.retention.hours",
		doc:     "How long records are kept, -1 for ever (TopicConfig.Retention).",
		get: func(c diskless.TopicConfig) string {
			switch {
			case c.Retention < 0:
				return "-1"
			case c.Retention == 0:
				return ""
			}
			return strconv.FormatInt(c.Retention.Milliseconds(), 10)
		},
		set: func(c *diskless.TopicConfig, v string) error {
			n, err := parseInt(v, -1, math.MaxInt64)
			switch {
			case n < 0:
				c.Retention = -1
			case n == 0:
				c.Retention = time.Millisecond // the facade reads 0 as the default
			default:
				c.Retention = msConfig(n)
			}
			return err
		}},
	{name: "segment.bytes", typ: kmsg.ConfigTypeInt, def: strconv.Itoa(kbatch.DefaultSegmentBytes), check: intAtLeast(1 << 20),
		synonym: "log.segment.bytes",
		doc:     "The size at which compaction cuts a segment (TopicConfig.SegmentBytes).",
		get: func(c diskless.TopicConfig) string {
			if c.SegmentBytes == 0 {
				return ""
			}
			return strconv.FormatInt(c.SegmentBytes, 10)
		},
		set: func(c *diskless.TopicConfig, v string) error {
			n, err := parseInt(v, 14, math.MaxInt32)
			c.SegmentBytes = n
			return err
		}},
	{name: "segment.index.bytes", typ: kmsg.ConfigTypeInt, def: strconv.Itoa(segment.DefaultSegmentIndexBytes), check: intAtLeast(4),
		synonym: "log.index.size.max.bytes",
		doc:     "Kafka's size of a local segment's offset index."},
	{name: "segment.jitter.ms", typ: kmsg.ConfigTypeLong, def: "0", check: longAtLeast(0),
		synonym: "log.roll.jitter.hours",
		doc:     "Kafka's jitter of segment rolls."},
	{name: "segment.ms", typ: kmsg.ConfigTypeLong, def: msString(segment.DefaultSegmentTime), check: longAtLeast(1),
		synonym: "log.roll.hours",
		doc:     "The age at which compaction cuts a segment (TopicConfig.SegmentTime).",
		get: func(c diskless.TopicConfig) string {
			if c.SegmentTime == 0 {
				return ""
			}
			return strconv.FormatInt(c.SegmentTime.Milliseconds(), 10)
		},
		set: func(c *diskless.TopicConfig, v string) error {
			n, err := parseInt(v, 1, maxMs)
			c.SegmentTime = time.Duration(n) * time.Millisecond
			return err
		}},
	{name: "unclean.leader.election.enable", typ: kmsg.ConfigTypeBoolean, def: "false", check: boolean,
		synonym: "unclean.leader.election.enable",
		doc:     "Kafka's election of an out-of-sync replica; there are no replicas here."},
}

// configDefOf returns the config named, if Kafka has it.
func configDefOf(name string) (*configDef, bool) {
	i, ok := slices.BinarySearchFunc(kafkaTopicConfigs, name, func(d configDef, n string) int { return strings.Compare(d.name, n) })
	if !ok {
		return nil, false
	}
	return &kafkaTopicConfigs[i], true
}

// validateConfig checks one config of a topic and returns its value as
// Kafka shows it; the error is the INVALID_CONFIG message.
func validateConfig(name, value string) (string, error) {
	d, ok := configDefOf(name)
	if !ok {
		return "", fmt.Errorf("Unknown topic config name: %s", name)
	}
	v, err := d.check(value)
	if err != nil {
		return "", fmt.Errorf("Invalid value %s for configuration %s: %v", value, name, err)
	}
	return v, nil
}

// libValue returns the value of a config the facade implements as cfg
// has it.
func (d *configDef) libValue(cfg diskless.TopicConfig) string {
	if v := d.get(cfg); v != "" {
		return v
	}
	return d.def
}

// applyLibConfigs sets the configs the facade implements in cfg.
func applyLibConfigs(cfg *diskless.TopicConfig, overrides map[string]string) error {
	for name, v := range overrides {
		if d, _ := configDefOf(name); d != nil && d.set != nil {
			if err := d.set(cfg, v); err != nil {
				return fmt.Errorf("Invalid value %s for configuration %s: %v", v, name, err)
			}
		}
	}
	return nil
}

// describedConfig is one config of a topic as DescribeConfigs shows it.
type describedConfig struct {
	name, value string
	typ         kmsg.ConfigType
	source      kmsg.ConfigSource
	synonyms    []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	doc         string
}

// describeTopicConfigs returns every config of a topic: the value it sets
// (DYNAMIC_TOPIC_CONFIG; the configs the facade implements also count
// as set when they differ from the default, for topics created before
// the configs were stored and for the internal topics), else the default
// (DEFAULT_CONFIG), and the synonyms Kafka lists: the topic's own value,
// then the broker configs it falls back to.
func describeTopicConfigs(t diskless.TopicDescription, overrides map[string]string) []describedConfig {
	out := make([]describedConfig, 0, len(kafkaTopicConfigs))
	for i := range kafkaTopicConfigs {
		d := &kafkaTopicConfigs[i]
		e := describedConfig{name: d.name, value: d.def, typ: d.typ, source: kmsg.ConfigSourceDefaultConfig, doc: d.doc}
		v, set := overrides[d.name]
		if !set && d.get != nil {
			if lv := d.libValue(t.Config); lv != d.def {
				v, set = lv, true
			}
		}
		if set {
			e.value, e.source = v, kmsg.ConfigSourceDynamicTopicConfig
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = d.name, &v, kmsg.ConfigSourceDynamicTopicConfig
			e.synonyms = append(e.synonyms, syn)
		}
		if d.synonym != "" {
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			val := d.def
			if strings.HasSuffix(d.synonym, ".hours") {
				ms, _ := strconv.ParseInt(d.def, 10, 64)
				val = strconv.FormatInt(ms/int64(time.Hour/time.Millisecond), 10)
			}
			syn.Name, syn.Value, syn.Source = d.synonym, &val, kmsg.ConfigSourceDefaultConfig
			e.synonyms = append(e.synonyms, syn)
		}
		out = append(out, e)
	}
	return out
}

// Validators, as Kafka's ConfigDef types and validators.
func longAtLeast(lo int64) func(string) (string, error) {
	return func(v string) (string, error) {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return "", errors.New("Not a number of type LONG")
		}
		if n < lo {
			return "", fmt.Errorf("Value must be at least %d", lo)
		}
		return strconv.FormatInt(n, 10), nil
	}
}

func anyLong(v string) (string, error) { return longAtLeast(math.MinInt64)(v) }

func intBetween(lo, hi int64) func(string) (string, error) {
	return func(v string) (string, error) {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return "", errors.New("Not a number of type INT")
		}
		switch {
		case n < lo && hi == math.MaxInt32:
			return "", fmt.Errorf("Value must be at least %d", lo)
		case n < lo || n > hi:
			return "", fmt.Errorf("Value must be no less than %d and no more than %d", lo, hi)
		}
		return strconv.FormatInt(n, 10), nil
	}
}

func intAtLeast(lo int64) func(string) (string, error) { return intBetween(lo, math.MaxInt32) }

func gzipLevel(v string) (string, error) {
	n, err := intBetween(-1, 9)(v)
	if err == nil && n == "0" {
		err = errors.New("Value must be -1 or no less than 1 and no more than 9")
	}
	if err != nil && strings.HasPrefix(err.Error(), "Value") {
		err = errors.New("Value must be -1 or no less than 1 and no more than 9")
	}
	return n, err
}

func boolean(v string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return "true", nil
	case "false":
		return "false", nil
	}
	return "", errors.New("Expected value to be either true or false")
}

func oneOf(vals ...string) func(string) (string, error) {
	return func(v string) (string, error) {
		v = strings.TrimSpace(v)
		if slices.Contains(vals, v) {
			return v, nil
		}
		return "", fmt.Errorf("String must be one of: %s", strings.Join(vals, ", "))
	}
}

// listOf validates a comma-separated list whose items are in vals.
func listOf(vals ...string) func(string) (string, error) {
	return func(v string) (string, error) {
		var items []string
		for _, it := range strings.Split(v, ",") {
			it = strings.TrimSpace(it)
			if !slices.Contains(vals, it) {
				return "", fmt.Errorf("Invalid value %s for configuration: String must be one of: %s", it, strings.Join(vals, ", "))
			}
			items = append(items, it)
		}
		return strings.Join(items, ","), nil
	}
}

func ratio(v string) (string, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return "", errors.New("Not a number of type DOUBLE")
	}
	if f < 0 || f > 1 {
		return "", errors.New("Value must be no less than 0 and no more than 1")
	}
	return strconv.FormatFloat(f, 'f', -1, 64), nil
}

// throttledReplicas validates a leader or follower throttled replica list:
// empty, "*", or partition:broker pairs.
func throttledReplicas(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "*" {
		return v, nil
	}
	var items []string
	for _, it := range strings.Split(v, ",") {
		it = strings.TrimSpace(it)
		p, b, ok := strings.Cut(it, ":")
		_, perr := strconv.ParseUint(p, 10, 31)
		_, berr := strconv.ParseUint(b, 10, 31)
		if !ok || perr != nil || berr != nil {
			return "", errors.New("Value must be a list of the form [PartitionId]:[BrokerId] or the single wildcard character '*'")
		}
		items = append(items, it)
	}
	return strings.Join(items, ","), nil
}

// producerOnly is compression.type here: any of Kafka's values is valid,
// but the broker stores batches as produced.
func producerOnly(v string) (string, error) {
	v, err := oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")(v)
	if err != nil {
		return "", err
	}
	if v != "producer" {
		return "", errors.New("a diskless topic keeps batches as produced: only producer is supported")
	}
	return v, nil
}

// msString is d in milliseconds, as a config's value.
func msString(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// msConfig is a config's n milliseconds as a Duration (at most the
// longest one).
func msConfig(n int64) time.Duration {
	return time.Duration(min(n, maxMs)) * time.Millisecond
}

// parseInt parses a decimal integer within [lo, hi].
func parseInt(v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, err
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%d is outside [%d, %d]", n, lo, hi)
	}
	return n, nil
}
