package sim

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/google/uuid"
)

// topicKind is what a topic of the workload is for.
type topicKind int

const (
	kindPlain      topicKind = iota // delete policy, no retention bound: DeleteRecords and transactions
	kindCompact                     // cleanup.policy compact, keyed records, no transactions
	kindRetention                   // retention.ms short enough to act during a run
	kindAppendTime                  // message.timestamp.type LogAppendTime, delete policy
)

// kindLetters are the first letters of the topics' names, by kind.
const kindLetters = "pcra"

// topic is a topic the workload created.
type topic struct {
	name       string
	id         uuid.UUID
	kind       topicKind
	partitions int32
	// gen is the topic's incarnation: how many topics of its name were
	// deleted before it was created.
	gen int
	// deleted is set from when the admin starts to delete the topic
	// until a topic of its name is created again: the actors leave it
	// alone, and the final read skips it. gone says the delete was
	// confirmed (the final phase deletes again one that was not).
	deleted, gone bool
}

// tag is how the history names the topic: its name for the first
// incarnation, name@gen for the next ones.
func (t topic) tag() string {
	if t.gen == 0 {
		return t.name
	}
	return fmt.Sprintf("%s@%d", t.name, t.gen)
}

// topicSet is the topics created so far. It is safe for concurrent use.
type topicSet struct {
	mu sync.Mutex
	m  map[string]*topic
	// order keeps creation order, so that a pick depends on the seed only.
	order []string
}

func newTopicSet() *topicSet { return &topicSet{m: map[string]*topic{}} }

// set records t (or its new partition count) when it is the current
// incarnation of its name; a deleted topic is left as it is, since a
// listing of the topics that still shows it was made before the delete.
func (s *topicSet) set(t topic) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[t.name]; ok {
		if old.deleted || t.id != (uuid.UUID{}) && old.id != (uuid.UUID{}) && t.id != old.id {
			return
		}
		old.partitions = max(old.partitions, t.partitions)
		if t.id != (uuid.UUID{}) {
			old.id = t.id
		}
		return
	}
	s.m[t.name] = &t
	s.order = append(s.order, t.name)
}

// created records a topic just created: the first of its name, or the
// next incarnation of a deleted one (t.gen is then set here).
func (s *topicSet) created(t topic) topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.m[t.name]
	if !ok {
		s.m[t.name] = &t
		s.order = append(s.order, t.name)
		return t
	}
	if old.deleted {
		t.gen = old.gen + 1
	} else {
		t.gen = old.gen
	}
	*old = t
	return t
}

// nextGen returns the incarnation a topic of name created now gets.
func (s *topicSet) nextGen(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.m[name]
	switch {
	case !ok:
		return 0
	case old.deleted:
		return old.gen + 1
	}
	return old.gen
}

// markDeleted marks a topic deleted (from the start of its delete): the
// actors stop choosing it.
func (s *topicSet) markDeleted(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.m[name]; ok {
		t.deleted = true
	}
}

// markGone records that a deleted topic's delete was confirmed.
func (s *topicSet) markGone(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.m[name]; ok && t.deleted {
		t.gone = true
	}
}

// undeleted returns the topics whose delete began and was never
// confirmed (it failed every try), in creation order.
func (s *topicSet) undeleted() []topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []topic
	for _, n := range s.order {
		if t := s.m[n]; t.deleted && !t.gone {
			out = append(out, *t)
		}
	}
	return out
}

// current reports whether t is still the live incarnation of its name:
// an actor that chose it before a delete stops retrying its call.
func (s *topicSet) current(t topic) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.m[t.name]
	return ok && !old.deleted && old.gen == t.gen
}

// tagOf returns the tag of the live incarnation of a topic name, false
// when there is none.
func (s *topicSet) tagOf(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.m[name]
	if !ok || t.deleted {
		return "", false
	}
	return t.tag(), true
}

// all returns the live topics in creation order.
func (s *topicSet) all() []topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]topic, 0, len(s.order))
	for _, n := range s.order {
		if t := s.m[n]; !t.deleted {
			out = append(out, *t)
		}
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

// tagFor returns the tag of the live incarnation of a topic name, or
// the name itself when there is none.
func (s *topicSet) tagFor(name string) string {
	if tag, ok := s.tagOf(name); ok {
		return tag
	}
	return name
}
