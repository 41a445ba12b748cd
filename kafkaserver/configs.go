package kafkaserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// Topic configs. The broker knows every topic config of Kafka 4
// (TopicConfig, LogConfig's ConfigDef), validates a value as Kafka's
// ConfigDef does (INVALID_CONFIG naming the config and why), stores the
// ones a topic sets, and describes each with its source and synonyms.
// Those the facade implements (cleanup.policy, delete.retention.ms,
// max.compaction.lag.ms, max.message.bytes, message.timestamp.type,
// min.cleanable.dirty.ratio, min.compaction.lag.ms, retention.bytes,
// retention.ms, segment.bytes, segment.ms) go to its TopicConfig when the
// topic is created, and AlterConfigs and IncrementalAlterConfigs change
// them there (Broker.AlterTopicConfig), all but message.timestamp.type:
// Fetch stamps a LogAppendTime topic's batches as it serves them, so it
// is fixed at creation (INVALID_CONFIG); internal topics' are the
// broker's. compression.type takes only "producer": batches are stored as
// produced, never recompressed. The others mean nothing here
// (replication, flushing, local segment files, the log cleaner's tuning)
// and are stored and described only.
//
// The configs a topic sets live in the compacted internal topic
// __diskless_topic_configs (nodes keep no state of their own): key the
// topic's name, value the topic's ID and its configs (a topic deleted and
// created again does not inherit them), a null value once the topic is
// deleted.

// configsTopic is the internal topic of topic configs.
const configsTopic = "__diskless_topic_configs"

// configDef is one Kafka topic config.
type configDef struct {
	name string
	typ  kmsg.ConfigType
	def  string // the default, as DescribeConfigs shows it
	// check validates a value and returns it as Kafka shows it, or why
	// it is invalid.
	check func(v string) (string, error)
	// synonyms are the broker configs it falls back to, with their
	// defaults, as DescribeConfigs lists them (Kafka leaves out those
	// without a value).
	synonyms [][2]string
	// lib, for the configs the facade implements, reads the value from
	// the facade's TopicConfig and sets it there.
	lib *topicConfig
}

const maxLong = "9223372036854775807"

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

// kafkaTopicConfigs are Kafka 4's topic configs, in name order.
var kafkaTopicConfigs = []configDef{
	{name: "cleanup.policy", typ: kmsg.ConfigTypeList, def: "delete", check: listOf("compact", "delete"), synonyms: [][2]string{{"log.cleanup.policy", "delete"}}},
	{name: "compression.gzip.level", typ: kmsg.ConfigTypeInt, def: "-1", check: gzipLevel, synonyms: [][2]string{{"compression.gzip.level", "-1"}}},
	{name: "compression.lz4.level", typ: kmsg.ConfigTypeInt, def: "9", check: intBetween(1, 17), synonyms: [][2]string{{"compression.lz4.level", "9"}}},
	{name: "compression.type", typ: kmsg.ConfigTypeString, def: "producer", check: producerOnly, synonyms: [][2]string{{"compression.type", "producer"}}},
	{name: "compression.zstd.level", typ: kmsg.ConfigTypeInt, def: "3", check: intBetween(-131072, 22), synonyms: [][2]string{{"compression.zstd.level", "3"}}},
	{name: "delete.retention.ms", typ: kmsg.ConfigTypeLong, def: "86400000", check: longAtLeast(0), synonyms: [][2]string{{"log.cleaner.delete.retention.ms", "86400000"}}},
	{name: "file.delete.delay.ms", typ: kmsg.ConfigTypeLong, def: "60000", check: longAtLeast(0), synonyms: [][2]string{{"log.segment.delete.delay.ms", "60000"}}},
	{name: "flush.messages", typ: kmsg.ConfigTypeLong, def: maxLong, check: longAtLeast(1), synonyms: [][2]string{{"log.flush.interval.messages", maxLong}}},
	{name: "flush.ms", typ: kmsg.ConfigTypeLong, def: maxLong, check: longAtLeast(0), synonyms: [][2]string{{"log.flush.scheduler.interval.ms", maxLong}}},
	{name: "follower.replication.throttled.replicas", typ: kmsg.ConfigTypeList, def: "", check: throttledReplicas},
	{name: "index.interval.bytes", typ: kmsg.ConfigTypeInt, def: "4096", check: intAtLeast(0), synonyms: [][2]string{{"log.index.interval.bytes", "4096"}}},
	{name: "leader.replication.throttled.replicas", typ: kmsg.ConfigTypeList, def: "", check: throttledReplicas},
	{name: "local.retention.bytes", typ: kmsg.ConfigTypeLong, def: "-2", check: longAtLeast(-2), synonyms: [][2]string{{"log.local.retention.bytes", "-2"}}},
	{name: "local.retention.ms", typ: kmsg.ConfigTypeLong, def: "-2", check: longAtLeast(-2), synonyms: [][2]string{{"log.local.retention.ms", "-2"}}},
	{name: "max.compaction.lag.ms", typ: kmsg.ConfigTypeLong, def: maxLong, check: longAtLeast(1), synonyms: [][2]string{{"log.cleaner.max.compaction.lag.ms", maxLong}}},
	{name: "max.message.bytes", typ: kmsg.ConfigTypeInt, def: "1048588", check: intAtLeast(0), synonyms: [][2]string{{"message.max.bytes", "1048588"}}},
	{name: "message.timestamp.after.max.ms", typ: kmsg.ConfigTypeLong, def: "3600000", check: longAtLeast(0), synonyms: [][2]string{{"log.message.timestamp.after.max.ms", "3600000"}}},
	{name: "message.timestamp.before.max.ms", typ: kmsg.ConfigTypeLong, def: maxLong, check: longAtLeast(0), synonyms: [][2]string{{"log.message.timestamp.before.max.ms", maxLong}}},
	{name: "message.timestamp.type", typ: kmsg.ConfigTypeString, def: "CreateTime", check: oneOf("CreateTime", "LogAppendTime"), synonyms: [][2]string{{"log.message.timestamp.type", "CreateTime"}}},
	{name: "min.cleanable.dirty.ratio", typ: kmsg.ConfigTypeDouble, def: "0.5", check: ratio, synonyms: [][2]string{{"log.cleaner.min.cleanable.ratio", "0.5"}}},
	{name: "min.compaction.lag.ms", typ: kmsg.ConfigTypeLong, def: "0", check: longAtLeast(0), synonyms: [][2]string{{"log.cleaner.min.compaction.lag.ms", "0"}}},
	{name: "min.insync.replicas", typ: kmsg.ConfigTypeInt, def: "1", check: intAtLeast(1), synonyms: [][2]string{{"min.insync.replicas", "1"}}},
	{name: "preallocate", typ: kmsg.ConfigTypeBoolean, def: "false", check: boolean, synonyms: [][2]string{{"log.preallocate", "false"}}},
	{name: "remote.log.copy.disable", typ: kmsg.ConfigTypeBoolean, def: "false", check: boolean},
	{name: "remote.log.delete.on.disable", typ: kmsg.ConfigTypeBoolean, def: "false", check: boolean},
	{name: "remote.storage.enable", typ: kmsg.ConfigTypeBoolean, def: "false", check: boolean},
	{name: "retention.bytes", typ: kmsg.ConfigTypeLong, def: "-1", check: anyLong, synonyms: [][2]string{{"log.retention.bytes", "-1"}}},
	{name: "retention.ms", typ: kmsg.ConfigTypeLong, def: "604800000", check: longAtLeast(-1), synonyms: [][2]string{{"log.retention.hours", "168"}}},
	{name: "segment.bytes", typ: kmsg.ConfigTypeInt, def: strconv.Itoa(kbatch.DefaultSegmentBytes), check: intAtLeast(1 << 20), synonyms: [][2]string{{"log.segment.bytes", strconv.Itoa(kbatch.DefaultSegmentBytes)}}},
	{name: "segment.index.bytes", typ: kmsg.ConfigTypeInt, def: "10485760", check: intAtLeast(4), synonyms: [][2]string{{"log.index.size.max.bytes", "10485760"}}},
	{name: "segment.jitter.ms", typ: kmsg.ConfigTypeLong, def: "0", check: longAtLeast(0), synonyms: [][2]string{{"log.roll.jitter.hours", "0"}}},
	{name: "segment.ms", typ: kmsg.ConfigTypeLong, def: "604800000", check: longAtLeast(1), synonyms: [][2]string{{"log.roll.hours", "168"}}},
	{name: "unclean.leader.election.enable", typ: kmsg.ConfigTypeBoolean, def: "false", check: boolean, synonyms: [][2]string{{"unclean.leader.election.enable", "false"}}},
}

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

func init() {
	for i := range kafkaTopicConfigs {
		d := &kafkaTopicConfigs[i]
		for j := range topicConfigs {
			if topicConfigs[j].name == d.name {
				d.lib = &topicConfigs[j]
			}
		}
	}
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

// topicOverrides are the configs one topic sets.
type topicOverrides struct {
	id      uuid.UUID // uuid.Nil: deleted
	configs map[string]string
	at      int64 // its record's offset: a later record wins
}

// configStore keeps the configs each topic sets, backed by configsTopic.
// It is safe for concurrent use.
type configStore struct {
	b   *diskless.Broker
	log *zap.Logger

	mu struct {
		sync.RWMutex
		topics map[string]topicOverrides
	}
	writeMu sync.Mutex // one write at a time: the last record of a topic wins
	// tail is the offset of the configs topic read up to; its lock is
	// held while it is read further.
	tail struct {
		sync.Mutex
		next int64
	}
}

// openConfigStore creates the configs topic if it is missing and loads
// it.
func openConfigStore(ctx context.Context, b *diskless.Broker, log *zap.Logger) (*configStore, error) {
	cs := &configStore{b: b, log: log}
	cs.mu.topics = map[string]topicOverrides{}
	if err := ensureInternalTopic(ctx, b, configsTopic); err != nil {
		return nil, err
	}
	n, err := cs.replay(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading topic configs from %s: %w", configsTopic, err)
	}
	log.Info("topic configs loaded", zap.Int("records", n), zap.Int("topics", len(cs.mu.topics)))
	return cs, nil
}

// replay reads the configs topic from where it was read up to (at first
// its start) to its high watermark, and returns the records read.
func (cs *configStore) replay(ctx context.Context) (int, error) {
	cs.tail.Lock()
	defer cs.tail.Unlock()
	next, n, err := replayTopicFrom(ctx, cs.b, configsTopic, cs.tail.next, cs.apply)
	cs.tail.next = next
	return n, err
}

// catchUp reads the configs other nodes of a cluster stored since the
// last time.
func (cs *configStore) catchUp(ctx context.Context) error {
	if _, err := cs.replay(ctx); err != nil {
		return fmt.Errorf("reading %s: %w", configsTopic, err)
	}
	return nil
}

// apply applies the record at offset of the configs topic, unless a
// later one of the same topic was applied.
func (cs *configStore) apply(key, value []byte, offset int64) {
	o := topicOverrides{at: offset} // a tombstone: deleted
	if value != nil {
		var err error
		if o, err = parseTopicOverrides(value); err != nil {
			cs.log.Warn("skipping a topic configs record", zap.Int64("offset", offset), zap.Error(err))
			return
		}
		o.at = offset
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cur, ok := cs.mu.topics[string(key)]; ok && cur.at > offset {
		return
	}
	cs.mu.topics[string(key)] = o
}

// get returns the configs topic t (of that ID) sets.
func (cs *configStore) get(name string, id uuid.UUID) map[string]string {
	cs.mu.RLock()
	defer cs.mu.RUnlock()
	o, ok := cs.mu.topics[name]
	if !ok || o.id != id {
		return nil
	}
	return o.configs
}

// set stores the configs a topic sets (none: the record says so).
func (cs *configStore) set(ctx context.Context, name string, id uuid.UUID, configs map[string]string) error {
	cs.writeMu.Lock()
	defer cs.writeMu.Unlock()
	o := topicOverrides{id: id, configs: maps.Clone(configs)}
	value := appendTopicOverrides(nil, o)
	at, err := writeRecords(ctx, cs.b, configsTopic, [][]byte{[]byte(name)}, [][]byte{value})
	if err != nil {
		return commitError(err)
	}
	cs.apply([]byte(name), value, at)
	return nil
}

// forget deletes a deleted topic's configs.
func (cs *configStore) forget(ctx context.Context, name string) error {
	cs.writeMu.Lock()
	defer cs.writeMu.Unlock()
	cs.mu.RLock()
	o, ok := cs.mu.topics[name]
	cs.mu.RUnlock()
	if !ok || o.id == uuid.Nil {
		return nil
	}
	at, err := writeRecords(ctx, cs.b, configsTopic, [][]byte{[]byte(name)}, [][]byte{nil})
	if err != nil {
		return commitError(err)
	}
	cs.apply([]byte(name), nil, at)
	return nil
}

// The record value of a topic's configs, version 0:
//
//	version  byte     0
//	topic ID 16 bytes the topic's UUID
//	count    uvarint  the configs that follow, sorted by name
//	count x  name     uvarint length, then the bytes
//	         value    uvarint length, then the bytes
const overridesVersion = 0

// errOverrides is a topic configs record that does not parse.
var errOverrides = errors.New("kafkaserver: bad topic configs record")

// appendTopicOverrides appends o's record value to dst.
func appendTopicOverrides(dst []byte, o topicOverrides) []byte {
	dst = append(dst, overridesVersion)
	dst = append(dst, o.id[:]...)
	dst = binary.AppendUvarint(dst, uint64(len(o.configs)))
	for _, name := range slices.Sorted(maps.Keys(o.configs)) {
		dst = binary.AppendUvarint(dst, uint64(len(name)))
		dst = append(dst, name...)
		v := o.configs[name]
		dst = binary.AppendUvarint(dst, uint64(len(v)))
		dst = append(dst, v...)
	}
	return dst
}

// parseTopicOverrides parses a record value of appendTopicOverrides. It
// copies what it keeps.
func parseTopicOverrides(b []byte) (topicOverrides, error) {
	var o topicOverrides
	if len(b) < 1+16 || b[0] != overridesVersion {
		return o, fmt.Errorf("%w: %d bytes, version %d", errOverrides, len(b), firstByte(b))
	}
	copy(o.id[:], b[1:17])
	b = b[17:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) { // every config takes 2 bytes at least
		return o, fmt.Errorf("%w: a count of %d", errOverrides, n)
	}
	b = b[k:]
	str := func() (string, bool) {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return "", false
		}
		s := string(b[k : k+int(l)])
		b = b[k+int(l):]
		return s, true
	}
	o.configs = make(map[string]string, n)
	for range n {
		name, ok1 := str()
		value, ok2 := str()
		if !ok1 || !ok2 {
			return o, fmt.Errorf("%w: truncated", errOverrides)
		}
		o.configs[name] = value
	}
	if len(b) > 0 {
		return o, fmt.Errorf("%w: %d bytes after the configs", errOverrides, len(b))
	}
	return o, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// alterConfigs answers AlterConfigs: each topic's configs become those
// named (the others return to their defaults). incrementalAlterConfigs
// answers IncrementalAlterConfigs: SET, DELETE, and APPEND and SUBTRACT
// for list configs. Both validate every value, refuse a change of
// message.timestamp.type (INVALID_CONFIG), alter the configs the facade
// implements through it (Broker.AlterTopicConfig), and store the
// result unless the request only validates. Broker configs are static
// here (Config): INVALID_REQUEST.
func (s *Server) alterConfigs(ctx context.Context, req *kmsg.AlterConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		code, msg := s.alterTopicConfigs(ctx, r.ResourceType, r.ResourceName, req.ValidateOnly, func(map[string]string) (map[string]string, error) {
			next := map[string]string{}
			for _, c := range r.Configs {
				if c.Value == nil {
					continue
				}
				v, err := validateConfig(c.Name, *c.Value)
				if err != nil {
					return nil, err
				}
				next[c.Name] = v
			}
			return next, nil
		})
		rr.ErrorCode, rr.ErrorMessage = code, msg
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// The operations of IncrementalAlterConfigs.
const (
	opSet      = 0
	opDelete   = 1
	opAppend   = 2
	opSubtract = 3
)

func (s *Server) incrementalAlterConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		code, msg := s.alterTopicConfigs(ctx, r.ResourceType, r.ResourceName, req.ValidateOnly, func(cur map[string]string) (map[string]string, error) {
			next := maps.Clone(cur)
			if next == nil {
				next = map[string]string{}
			}
			seen := map[string]bool{}
			for _, c := range r.Configs {
				d, ok := configDefOf(c.Name)
				if !ok {
					return nil, fmt.Errorf("Unknown topic config name: %s", c.Name)
				}
				if seen[c.Name] {
					return nil, fmt.Errorf("Duplicate config keys: %s", c.Name)
				}
				seen[c.Name] = true
				list := d.typ == kmsg.ConfigTypeList
				switch op := int8(c.Op); {
				case op == opSet:
					if c.Value == nil {
						return nil, fmt.Errorf("Null value not supported for: %s", c.Name)
					}
					v, err := validateConfig(c.Name, *c.Value)
					if err != nil {
						return nil, err
					}
					next[c.Name] = v
				case op == opDelete:
					delete(next, c.Name)
				case (op == opAppend || op == opSubtract) && !list:
					return nil, fmt.Errorf("Config value append or subtract is not allowed for config key: %s", c.Name)
				case op == opAppend || op == opSubtract:
					base, ok := next[c.Name]
					if !ok {
						base = d.def
					}
					items := splitList(base)
					for _, it := range splitList(deref(c.Value)) {
						if op == opAppend && !slices.Contains(items, it) {
							items = append(items, it)
						} else if op == opSubtract {
							items = slices.DeleteFunc(items, func(x string) bool { return x == it })
						}
					}
					v, err := validateConfig(c.Name, strings.Join(items, ","))
					if err != nil {
						return nil, err
					}
					next[c.Name] = v
				default:
					return nil, fmt.Errorf("Unknown operation %d for config %s", op, c.Name)
				}
			}
			return next, nil
		})
		rr.ErrorCode, rr.ErrorMessage = code, msg
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

func splitList(v string) []string {
	var out []string
	for _, it := range strings.Split(v, ",") {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

// alterTopicConfigs alters one resource's configs: next computes the
// configs the topic will set from those it sets; the answer is an error
// code and message.
func (s *Server) alterTopicConfigs(ctx context.Context, typ kmsg.ConfigResourceType, name string, validateOnly bool, next func(map[string]string) (map[string]string, error)) (int16, *string) {
	fail := func(code int16, format string, args ...any) (int16, *string) {
		msg := fmt.Sprintf(format, args...)
		return code, &msg
	}
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		return fail(int16(kafkaerr.InvalidRequest), "broker configs are static here: they are set where the server starts (kafkaserver.Config; kafka-broker's flags)")
	default:
		return fail(int16(kafkaerr.InvalidRequest), "resource type %v is not served", typ)
	}
	x, err := s.topicIndex(ctx)
	if err != nil {
		return codeOf(err), messageOf(err)
	}
	t, ok := x.topic(ctx, name)
	if !ok {
		return fail(int16(kafkaerr.UnknownTopicOrPartition), "topic %s does not exist", name)
	}
	if err := s.catchUpConfigs(ctx); err != nil {
		return codeOf(err), messageOf(err)
	}
	cur := s.configs.get(t.Name, t.ID)
	want, err := next(cur)
	if err != nil {
		return fail(int16(kafkaerr.InvalidConfig), "%v", err)
	}
	// The configs the facade implements: those set take their value,
	// those no longer set their default, the others stay as the facade
	// has them (an internal topic's, or one created before its configs
	// were stored).
	after := t.Config
	changed := map[string]string{}
	for i := range topicConfigs {
		e := &topicConfigs[i]
		if v, ok := want[e.name]; ok {
			changed[e.name] = v
		} else if _, was := cur[e.name]; was && e.name != "message.timestamp.type" {
			// (message.timestamp.type cannot change: one not named
			// stays as it is.)
			changed[e.name] = e.def
		}
	}
	if err := applyLibConfigs(&after, changed); err != nil {
		return fail(int16(kafkaerr.InvalidConfig), "%v", err)
	}
	if isInternal(t.Name) && after != t.Config {
		return fail(int16(kafkaerr.InvalidConfig), "%s is an internal topic: its cleanup, retention and sizes are the broker's", t.Name)
	}
	if after.LogAppendTime != t.Config.LogAppendTime {
		return fail(int16(kafkaerr.InvalidConfig), "message.timestamp.type cannot change on a diskless topic (it is %s): its batches are stamped as they are read",
			map[bool]string{false: "CreateTime", true: "LogAppendTime"}[t.Config.LogAppendTime])
	}
	if validateOnly {
		return 0, nil
	}
	// Always: t.Config may be a little old (another node's change), and
	// the coordinator changes nothing if after is what the topic has.
	if err := s.b.AlterTopicConfig(ctx, t.Name, after); err != nil {
		return codeOf(err), messageOf(err)
	}
	if maps.Equal(cur, want) {
		return 0, nil
	}
	if err := s.configs.set(ctx, t.Name, t.ID, want); err != nil {
		return codeOf(err), messageOf(err)
	}
	s.log.Info("topic configs altered", zap.String("topic", name), zap.Any("configs", want))
	return 0, nil
}
