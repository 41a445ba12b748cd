package kafkaserver

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/kafkaerr"
)

// codeOf returns the Kafka error code of an error of the facade.
func codeOf(err error) int16 { return int16(kafkaerr.CodeOf(err)) }

// messageOf returns err's text for an ErrorMessage field, nil for nil.
func messageOf(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// topicIndex is the topics by name and by ID, as DescribeTopics returned
// them. In a cluster, DescribeTopics may not know yet of a topic another
// node created a moment ago (the library reads the other shards' topics
// again when what it knows is 200 ms old): topic and topicByID read the
// index again, once, on a miss.
type topicIndex struct {
	s      *Server
	reread bool // read again after a miss
	byName map[string]diskless.TopicDescription
	byID   map[uuid.UUID]diskless.TopicDescription
	names  []string // sorted
}

// catalogAge is how long after a miss a cluster node reads the topics
// again: past the library's freshness bound for them (200 ms), so that
// the second read sees every topic created before the first.
const catalogAge = 250 * time.Millisecond

// topic returns the topic named, reading the index again on a miss in a
// cluster.
func (x *topicIndex) topic(ctx context.Context, name string) (diskless.TopicDescription, bool) {
	t, ok := x.byName[name]
	if !ok && x.readAgain(ctx) {
		t, ok = x.byName[name]
	}
	return t, ok
}

// topicByID returns the topic of that ID, as topic does.
func (x *topicIndex) topicByID(ctx context.Context, id uuid.UUID) (diskless.TopicDescription, bool) {
	t, ok := x.byID[id]
	if !ok && x.readAgain(ctx) {
		t, ok = x.byID[id]
	}
	return t, ok
}

// readAgain reads the index again, once catalogAge has passed, if this
// is a cluster node and it has not yet; it reports whether it did.
func (x *topicIndex) readAgain(ctx context.Context) bool {
	if x.s == nil || !x.s.cfg.Clustered || x.reread {
		return false
	}
	x.reread = true
	if clock.Sleep(ctx, x.s.clock, catalogAge) != nil {
		return false
	}
	y, err := x.s.topicIndex(ctx)
	if err != nil {
		return false
	}
	x.byName, x.byID, x.names = y.byName, y.byID, y.names
	return true
}

func (s *Server) topicIndex(ctx context.Context) (topicIndex, error) {
	ts, err := s.b.DescribeTopics(ctx)
	if err != nil {
		return topicIndex{}, err
	}
	x := topicIndex{s: s, byName: make(map[string]diskless.TopicDescription, len(ts)), byID: make(map[uuid.UUID]diskless.TopicDescription, len(ts))}
	for _, t := range ts {
		x.byName[t.Name], x.byID[t.ID] = t, t
		x.names = append(x.names, t.Name)
	}
	slices.Sort(x.names)
	return x, nil
}

// isInternal reports whether topic is one the broker keeps for itself;
// clients may read it but not write or delete it, as in Kafka.
func isInternal(topic string) bool { return topic == offsetsTopic || topic == configsTopic }

// metadata answers Metadata: the live nodes, and every topic asked for
// (all when the list is null, or empty in version 0), each partition led
// at epoch 0 by the node partitionLeader picks for a client of rack (""
// if it told none): on a single node, this one. Unknown topics are
// created when both the request and the broker allow it.
func (s *Server) metadata(ctx context.Context, req *kmsg.MetadataRequest, rack string) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	nodes := s.nodes()
	for _, n := range nodes {
		br := kmsg.NewMetadataResponseBroker()
		br.NodeID, br.Host, br.Port, br.Rack = n.id, n.host, n.port, n.rackOrNil()
		resp.Brokers = append(resp.Brokers, br)
	}
	cluster := clusterID
	resp.ClusterID = &cluster
	resp.ControllerID = s.controller(nodes)
	topicMetadata := func(t diskless.TopicDescription) kmsg.MetadataResponseTopic { return s.topicMetadata(t, nodes, rack) }

	x, err := s.topicIndex(ctx)
	if err != nil {
		return nil, err
	}
	if req.Topics == nil || req.Version == 0 && len(req.Topics) == 0 { // all topics (version 0: an empty list)
		for _, name := range x.names {
			resp.Topics = append(resp.Topics, topicMetadata(x.byName[name]))
		}
		return resp, nil
	}
	autoCreate := s.autoCreates(req)
	for _, rt := range req.Topics {
		var t diskless.TopicDescription
		var ok bool
		switch {
		case rt.Topic != nil:
			t, ok = x.topic(ctx, *rt.Topic)
		default:
			t, ok = x.topicByID(ctx, uuid.UUID(rt.TopicID))
		}
		if ok {
			resp.Topics = append(resp.Topics, topicMetadata(t))
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
		switch {
		case rt.Topic == nil:
			mt.ErrorCode = int16(kafkaerr.UnknownTopicID)
		case !autoCreate:
			mt.ErrorCode = int16(kafkaerr.UnknownTopicOrPartition)
		default:
			t, err := s.autoCreate(ctx, *rt.Topic)
			if err != nil {
				mt.ErrorCode = codeOf(err)
				break
			}
			mt = topicMetadata(t)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp, nil
}

// autoCreate creates a topic with the default partitions, or finds the
// one that someone else just created.
func (s *Server) autoCreate(ctx context.Context, name string) (diskless.TopicDescription, error) {
	_, err := s.b.CreateTopic(ctx, name, diskless.TopicConfig{Partitions: s.cfg.DefaultPartitions})
	if err != nil && kafkaerr.CodeOf(err) != kafkaerr.TopicAlreadyExists {
		return diskless.TopicDescription{}, err
	}
	x, err := s.topicIndex(ctx)
	if err != nil {
		return diskless.TopicDescription{}, err
	}
	t, ok := x.topic(ctx, name)
	if !ok {
		return t, &kafkaerr.Error{Code: kafkaerr.UnknownTopicOrPartition, Message: "topic " + name + " was deleted as it was created"}
	}
	s.log.Info("topic auto-created", zap.String("topic", name), zap.Int32("partitions", s.cfg.DefaultPartitions))
	return t, nil
}

// topicMetadata describes a topic for a client of rack: each partition's
// leader is the only replica (the bucket replicates).
func (s *Server) topicMetadata(t diskless.TopicDescription, nodes []node, rack string) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic, mt.TopicID, mt.IsInternal = &name, t.ID, isInternal(t.Name)
	for p := range t.Config.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		leader := partitionLeader(nodes, t.Name, p, rack).id
		mp.Partition, mp.Leader, mp.LeaderEpoch = p, leader, 0
		mp.Replicas, mp.ISR = []int32{leader}, []int32{leader}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// controller returns the node Metadata and DescribeCluster name as the
// controller: the leader of the coordinator's shard 0, which serves the
// admin calls (every node takes them and forwards), if it is among the
// nodes, else the first.
func (s *Server) controller(nodes []node) int32 {
	if m, ok := s.b.ShardLeader(0); ok {
		for _, n := range nodes {
			if n.id == m.ID {
				return n.id
			}
		}
	}
	return nodes[0].id
}

// nameCounts is how many times each of items, named by name, is named:
// a request naming a resource twice is refused.
func nameCounts[T any](items []T, name func(T) string) map[string]int {
	n := map[string]int{}
	for _, it := range items {
		n[name(it)]++
	}
	return n
}

// createTopics answers CreateTopics. Any replication factor is accepted
// (the bucket replicates) and reported as 1; a partition count of -1
// means the broker's default; every Kafka topic config is accepted and
// validated (topicconfig.go). The configs a topic sets are stored once it is
// created; if that fails, the topic is deleted again and the error
// answered, so that a topic never exists without its configs.
func (s *Server) createTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := nameCounts(req.Topics, func(t kmsg.CreateTopicsRequestTopic) string { return t.Topic })
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		cfg, overrides, err := s.newTopicConfig(t, seen[t.Topic])
		var id uuid.UUID
		if err == nil && req.ValidateOnly {
			var x topicIndex
			if x, err = s.topicIndex(ctx); err == nil {
				if _, ok := x.topic(ctx, t.Topic); ok {
					err = &kafkaerr.Error{Code: kafkaerr.TopicAlreadyExists, Message: "topic " + t.Topic + " already exists"}
				}
			}
			if err == nil {
				err = s.b.ValidateNewTopic(ctx, cfg) // INVALID_PARTITIONS or POLICY_VIOLATION, as CreateTopic answers
			}
		} else if err == nil {
			if id, err = s.b.CreateTopic(ctx, t.Topic, cfg); err == nil && len(overrides) > 0 {
				if err = s.configs.set(ctx, t.Topic, id, overrides); err != nil {
					if derr := s.b.DeleteTopic(ctx, t.Topic); derr != nil {
						s.log.Warn("deleting a topic whose configs could not be stored", zap.String("topic", t.Topic), zap.Error(derr))
					}
				}
			}
			if err == nil {
				rt.TopicID = id
				s.log.Info("topic created", zap.String("topic", t.Topic), zap.Int32("partitions", cfg.Partitions))
			}
		}
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = codeOf(err), messageOf(err)
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		rt.NumPartitions, rt.ReplicationFactor = cfg.Partitions, 1
		for _, e := range describeTopicConfigs(diskless.TopicDescription{Name: t.Topic, ID: id, Config: cfg}, overrides) {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name, c.Value, c.Source = e.name, &e.value, int8(e.source)
			rt.Configs = append(rt.Configs, c)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// newTopicConfig checks one topic of a CreateTopics request and returns
// its configuration for the facade and the configs it sets.
func (s *Server) newTopicConfig(t kmsg.CreateTopicsRequestTopic, copies int) (diskless.TopicConfig, map[string]string, error) {
	bad := func(code kafkaerr.Code, format string, args ...any) (diskless.TopicConfig, map[string]string, error) {
		return diskless.TopicConfig{}, nil, &kafkaerr.Error{Code: code, Message: fmt.Sprintf(format, args...)}
	}
	cfg := diskless.TopicConfig{Partitions: t.NumPartitions}
	switch {
	case copies > 1:
		return bad(kafkaerr.InvalidRequest, "topic %s is named %d times in the request", t.Topic, copies)
	case len(t.ReplicaAssignment) > 0 && t.NumPartitions != -1:
		return bad(kafkaerr.InvalidRequest, "both a partition count and a replica assignment")
	case len(t.ReplicaAssignment) > 0:
		cfg.Partitions = int32(len(t.ReplicaAssignment))
	case t.NumPartitions == -1:
		cfg.Partitions = s.cfg.DefaultPartitions
	case t.NumPartitions <= 0:
		return bad(kafkaerr.InvalidPartitions, "%d partitions", t.NumPartitions)
	}
	if t.ReplicationFactor == 0 || t.ReplicationFactor < -1 {
		return bad(kafkaerr.InvalidReplicationFactor, "replication factor %d", t.ReplicationFactor)
	}
	overrides := map[string]string{}
	for _, c := range t.Configs {
		if c.Value == nil {
			continue // null: the default
		}
		v, err := validateConfig(c.Name, *c.Value)
		if err != nil {
			return bad(kafkaerr.InvalidConfig, "%v", err)
		}
		overrides[c.Name] = v
	}
	if err := applyLibConfigs(&cfg, overrides); err != nil {
		return bad(kafkaerr.InvalidConfig, "%v", err)
	}
	return cfg, overrides, nil
}

// deleteTopics answers DeleteTopics, by name or (v6) by ID. The committed
// offsets of a deleted topic are deleted too, as in Kafka.
func (s *Server) deleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	topics := req.Topics
	for _, name := range req.TopicNames {
		topics = append(topics, kmsg.DeleteTopicsRequestTopic{Topic: &name})
	}
	var x topicIndex
	for i, t := range topics {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		} else {
			if i == 0 || x.byID == nil {
				var err error
				if x, err = s.topicIndex(ctx); err != nil {
					return nil, err
				}
			}
			d, ok := x.topicByID(ctx, uuid.UUID(t.TopicID))
			if !ok {
				rt.ErrorCode = int16(kafkaerr.UnknownTopicID)
				resp.Topics = append(resp.Topics, rt)
				continue
			}
			name = d.Name
			rt.Topic = &name
		}
		var err error
		if isInternal(name) {
			err = &kafkaerr.Error{Code: kafkaerr.InvalidRequest, Message: "the internal topic " + name + " cannot be deleted"}
		} else {
			err = s.b.DeleteTopic(ctx, name)
		}
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = codeOf(err), messageOf(err)
		} else {
			s.log.Info("topic deleted", zap.String("topic", name))
			// Another node may have stored configs of it.
			if err := s.catchUpConfigs(ctx); err != nil {
				s.log.Warn("reading the internal topics on", zap.String("topic", name), zap.Error(err))
			}
			if err := forgetTopic(ctx, s.offsets, name); err != nil {
				s.log.Warn("deleting the committed offsets of a deleted topic", zap.String("topic", name), zap.Error(err))
			}
			if err := s.configs.forget(ctx, name); err != nil {
				s.log.Warn("deleting the configs of a deleted topic", zap.String("topic", name), zap.Error(err))
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// describeConfigs answers DescribeConfigs for topics (their configs, from
// the coordinator) and for this broker (a few static settings).
func (s *Server) describeConfigs(ctx context.Context, req *kmsg.DescribeConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	var x topicIndex
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		want := func(name string) bool { return r.ConfigNames == nil || slices.Contains(r.ConfigNames, name) }
		add := func(name, value, doc string, typ kmsg.ConfigType, src kmsg.ConfigSource, readOnly bool, synonyms ...kmsg.DescribeConfigsResponseResourceConfigConfigSynonym) {
			if !want(name) {
				return
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name, c.Value, c.ReadOnly, c.Source, c.ConfigType = name, &value, readOnly, src, typ
			if req.IncludeSynonyms {
				c.ConfigSynonyms = synonyms
			}
			if req.IncludeDocumentation && doc != "" {
				c.Documentation = &doc
			}
			if req.Version == 0 {
				c.IsDefault = src == kmsg.ConfigSourceDefaultConfig
			}
			rr.Configs = append(rr.Configs, c)
		}
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if x.byName == nil {
				var err error
				if x, err = s.topicIndex(ctx); err != nil {
					return nil, err
				}
				if err := s.catchUpConfigs(ctx); err != nil {
					return nil, err
				}
			}
			t, ok := x.topic(ctx, r.ResourceName)
			if !ok {
				rr.ErrorCode = int16(kafkaerr.UnknownTopicOrPartition)
				break
			}
			for _, e := range describeTopicConfigs(t, s.configs.get(t.Name, t.ID)) {
				add(e.name, e.value, e.doc, e.typ, e.source, false, e.synonyms...)
			}
		case kmsg.ConfigResourceTypeBroker:
			if r.ResourceName != "" && r.ResourceName != strconv.Itoa(int(s.cfg.NodeID)) {
				rr.ErrorCode = int16(kafkaerr.InvalidRequest)
				msg := "no broker " + r.ResourceName
				rr.ErrorMessage = &msg
				break
			}
			src := kmsg.ConfigSourceStaticBrokerConfig
			id := strconv.Itoa(int(s.cfg.NodeID))
			add("auto.create.topics.enable", strconv.FormatBool(s.cfg.AutoCreateTopics), "", kmsg.ConfigTypeBoolean, src, true)
			add("broker.id", id, "", kmsg.ConfigTypeInt, src, true)
			add("default.replication.factor", "1", "", kmsg.ConfigTypeShort, src, true)
			add("node.id", id, "", kmsg.ConfigTypeInt, src, true)
			add("num.partitions", strconv.Itoa(int(s.cfg.DefaultPartitions)), "", kmsg.ConfigTypeInt, src, true)
			add("offsets.topic.num.partitions", "1", "", kmsg.ConfigTypeInt, src, true)
		default:
			rr.ErrorCode = int16(kafkaerr.InvalidRequest)
			msg := fmt.Sprintf("resource type %v is not served", r.ResourceType)
			rr.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// findCoordinator answers FindCoordinator: a group's coordinator is the
// live node groupCoordinator picks (on a single node, this one); so would
// a transaction's be, though the broker serves none. Version 4 on, for
// each key of the request.
func (s *Server) findCoordinator(req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	nodes := s.nodes()
	find := func(key string) (code int16, n node) {
		switch {
		case req.CoordinatorType != 0 && req.CoordinatorType != 1:
			return int16(kafkaerr.InvalidRequest), node{id: -1, port: -1}
		case req.CoordinatorType == 0 && key == "":
			return int16(kafkaerr.InvalidGroupID), node{id: -1, port: -1}
		}
		return 0, groupCoordinator(nodes, key)
	}
	if req.Version < 4 {
		var n node
		resp.ErrorCode, n = find(req.CoordinatorKey)
		resp.NodeID, resp.Host, resp.Port = n.id, n.host, n.port
		return resp
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		var n node
		c.Key = key
		c.ErrorCode, n = find(key)
		c.NodeID, c.Host, c.Port = n.id, n.host, n.port
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}
