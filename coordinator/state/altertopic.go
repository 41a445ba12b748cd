package state

import (
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/google/uuid"
)

// AlterTopicRecord replaces a topic's config (its partitions aside).
type AlterTopicRecord struct {
	TopicID uuid.UUID
	Config  TopicConfig
}

func (AlterTopicRecord) Kind() recordType { return recAlterTopic }

func (r AlterTopicRecord) AppendTo(b []byte) []byte {
	b = append(b, r.TopicID[:]...)
	return appendTopicConfig(b, r.Config)
}

func (d *Decoder) alterTopic() AlterTopicRecord {
	return AlterTopicRecord{TopicID: d.uuid(), Config: d.topicConfig()}
}

// applyAlter applies an alter topic record to the view.
func (v *View) applyAlter(r AlterTopicRecord) {
	t := v.Topic(r.TopicID)
	if t == nil {
		return
	}
	c := *t
	c.Config = r.Config
	c.Config.Partitions = t.Partitions
	v.setTopic(c.ID, c.Name, &c)
}

type AlterTopicOp struct {
	BaseOp
	ID  uuid.UUID
	Cfg TopicConfig
}

func (o *AlterTopicOp) Check(g *Group) {
	t := g.Spec.Topic(o.ID)
	switch {
	case t == nil:
		o.Finish(kafkaerr.New(kafkaerr.UnknownTopicOrPartition, "no topic of ID %s", o.ID))
		return
	case o.Cfg.Check() != nil:
		o.Finish(o.Cfg.Check())
		return
	}
	cfg := o.Cfg.Normalized()
	cfg.Partitions = t.Partitions
	switch {
	case cfg.LogAppendTime != t.Config.LogAppendTime:
		o.Finish(kafkaerr.New(kafkaerr.InvalidConfig, "message.timestamp.type cannot change on a diskless topic: its batches are stamped as they are read"))
		return
	case cfg == t.Config:
		o.Finish(nil) // nothing changes: a repeated request
		return
	}
	g.add(AlterTopicRecord{TopicID: o.ID, Config: cfg})
}
