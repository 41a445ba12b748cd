package sim

import (
	"math/rand/v2"
	"sync"

	"github.com/google/uuid"
)

// topicKind is what a topic of the workload is for.
type topicKind int

const (
	kindPlain     topicKind = iota // delete policy, no retention bound: DeleteRecords and transactions
	kindCompact                    // cleanup.policy compact, keyed records, no transactions
	kindRetention                  // retention.ms short enough to act during a run
)

// topic is a topic the workload created.
type topic struct {
	name       string
	id         uuid.UUID
	kind       topicKind
	partitions int32
}

// topicSet is the topics created so far. It is safe for concurrent use.
type topicSet struct {
	mu sync.Mutex
	m  map[string]*topic
	// order keeps creation order, so that a pick depends on the seed only.
	order []string
}

func newTopicSet() *topicSet { return &topicSet{m: map[string]*topic{}} }

// set records t (or its new partition count).
func (s *topicSet) set(t topic) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[t.name]; ok {
		old.partitions = max(old.partitions, t.partitions)
		if t.id != (uuid.UUID{}) {
			old.id = t.id
		}
		return
	}
	s.m[t.name] = &t
	s.order = append(s.order, t.name)
}

// all returns the topics in creation order.
func (s *topicSet) all() []topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]topic, 0, len(s.order))
	for _, n := range s.order {
		out = append(out, *s.m[n])
	}
	return out
}

// pick returns a random partition of a topic of one of kinds.
func (s *topicSet) pick(rng *rand.Rand, kinds ...topicKind) (topic, int32, bool) {
	var in []topic
	for _, t := range s.all() {
		for _, k := range kinds {
			if t.kind == k {
				in = append(in, t)
			}
		}
	}
	if len(in) == 0 {
		return topic{}, 0, false
	}
	t := in[rng.IntN(len(in))]
	return t, rng.Int32N(t.partitions), true
}
