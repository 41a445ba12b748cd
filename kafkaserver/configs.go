package kafkaserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/kafkaerr"
)

// Topic configs. The broker knows every topic config of Kafka 4; the one
// table of them, with their defaults, validation, documentation and how
// those the facade implements map to its TopicConfig, is topicconfig.go.
// CreateTopics sets them (topics.go), AlterConfigs and
// IncrementalAlterConfigs below change them, those the facade implements
// through Broker.AlterTopicConfig, all but the ones fixed at creation
// (message.timestamp.type: INVALID_CONFIG); internal topics' are the
// broker's. The others are stored and described only.
//
// The configs a topic sets live in the compacted internal topic
// __diskless_topic_configs (nodes keep no state of their own): key the
// topic's name, value the topic's ID and its configs (a topic deleted and
// created again does not inherit them), a null value once the topic is
// deleted.

// configsTopic is the internal topic of topic configs.
const configsTopic = "__diskless_topic_configs"

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
// for list configs. Both validate every value, refuse a change of a
// config fixed at creation (INVALID_CONFIG), alter the configs the facade
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
	for i := range kafkaTopicConfigs {
		d := &kafkaTopicConfigs[i]
		if d.set == nil {
			continue
		}
		if v, ok := want[d.name]; ok {
			changed[d.name] = v
		} else if _, was := cur[d.name]; was && d.fixed == "" {
			// (A config fixed at creation cannot change: one not
			// named stays as it is.)
			changed[d.name] = d.def
		}
	}
	if err := applyLibConfigs(&after, changed); err != nil {
		return fail(int16(kafkaerr.InvalidConfig), "%v", err)
	}
	if isInternal(t.Name) && after != t.Config {
		return fail(int16(kafkaerr.InvalidConfig), "%s is an internal topic: its cleanup, retention and sizes are the broker's", t.Name)
	}
	for i := range kafkaTopicConfigs {
		d := &kafkaTopicConfigs[i]
		if d.fixed == "" {
			continue
		}
		if was := d.libValue(t.Config); d.libValue(after) != was {
			return fail(int16(kafkaerr.InvalidConfig), "%s cannot change on a diskless topic (it is %s): %s", d.name, was, d.fixed)
		}
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
