package kafkaserver

// The assignment of a consumer group's partitions (the uniform and
// range assignors) and the set operations on assignments.

import (
	"cmp"
	"maps"
	"slices"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// assignment is a set of partitions, by topic ID, each topic's
// partitions sorted.
type assignment map[uuid.UUID][]int32

// assign computes the target assignment of g's members over topics, for
// the group epoch, with the assignor most members ask for (uniform when
// tied or none does).
func (g *cgroup) assign(topics map[uuid.UUID]int32, names map[uuid.UUID]string) {
	votes := map[string]int{}
	for _, m := range g.members {
		if m.serverAssignor != "" {
			votes[m.serverAssignor]++
		}
	}
	g.assignor = assignorUniform
	if votes[assignorRange] > votes[assignorUniform] {
		g.assignor = assignorRange
	}
	ids := slices.Sorted(maps.Keys(g.members))
	subs := func(t uuid.UUID) []string {
		var out []string
		for _, id := range ids {
			if g.members[id].subscribes(names[t]) {
				out = append(out, id)
			}
		}
		return out
	}
	target := map[string]assignment{}
	for _, id := range ids {
		target[id] = assignment{}
	}
	topicIDs := sortedIDs(topics)
	if g.assignor == assignorRange {
		for _, t := range topicIDs {
			subscribers := subs(t)
			n, k := int(topics[t]), len(subscribers)
			if k == 0 {
				continue
			}
			next := 0
			for i, id := range subscribers {
				size := n / k
				if i < n%k {
					size++
				}
				for p := next; p < next+size; p++ {
					target[id][t] = append(target[id][t], int32(p))
				}
				next += size
			}
		}
	} else {
		// Uniform: with n members and k partitions, each member gets
		// k/n of them, and k%n members one more, so that no two loads
		// differ by more than one (when every member subscribes to
		// every topic). A partition stays with its target owner while
		// that owner is under its quota (the first pass: k/n; the
		// second: one more, while such places remain); the rest go to
		// the least loaded subscriber.
		total := 0
		for _, n := range topics {
			total += int(n)
		}
		base := total / max(len(ids), 1)
		extra := total % max(len(ids), 1)
		load := map[string]int{}
		type tp struct {
			t     uuid.UUID
			p     int32
			owner string
		}
		var over, rest []tp
		for _, t := range topicIDs {
			subscribers := subs(t)
			for p := range topics[t] {
				owner := ""
				for _, id := range subscribers {
					if slices.Contains(g.target[id][t], p) {
						owner = id
					}
				}
				switch {
				case owner != "" && load[owner] < base:
					target[owner][t] = append(target[owner][t], p)
					load[owner]++
				case owner != "":
					over = append(over, tp{t, p, owner})
				case len(subscribers) > 0:
					rest = append(rest, tp{t, p, ""})
				}
			}
		}
		for _, x := range over {
			if load[x.owner] == base && extra > 0 {
				target[x.owner][x.t] = append(target[x.owner][x.t], x.p)
				load[x.owner]++
				extra--
			} else {
				rest = append(rest, x)
			}
		}
		for _, x := range rest {
			best := slices.MinFunc(subs(x.t), func(a, b string) int {
				return cmp.Or(cmp.Compare(load[a], load[b]), cmp.Compare(a, b))
			})
			target[best][x.t] = append(target[best][x.t], x.p)
			load[best]++
		}
		for _, a := range target {
			for t := range a {
				slices.Sort(a[t])
			}
		}
	}
	g.target, g.targetEpoch, g.topics, g.names = target, g.epoch, topics, names
}

// toAssignment is a heartbeat's owned partitions as an assignment.
func toAssignment(ts []kmsg.ConsumerGroupHeartbeatRequestTopic) assignment {
	a := assignment{}
	for _, t := range ts {
		a[t.TopicID] = append(a[t.TopicID], t.Partitions...)
		slices.Sort(a[t.TopicID])
	}
	return a
}

// sortedIDs returns the keys of m, sorted.
func sortedIDs[V any](m map[uuid.UUID]V) []uuid.UUID {
	return slices.SortedFunc(maps.Keys(m), func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
}

// within reports whether every partition of a is in b.
func within(a, b assignment) bool {
	for t, ps := range a {
		for _, p := range ps {
			if !slices.Contains(b[t], p) {
				return false
			}
		}
	}
	return true
}

// overlaps reports whether a and b share a partition.
func overlaps(a, b assignment) bool {
	for t, ps := range a {
		for _, p := range ps {
			if slices.Contains(b[t], p) {
				return true
			}
		}
	}
	return false
}

// split returns the partitions of a in target, and those not.
func split(a, target assignment) (in, out assignment) {
	in, out = assignment{}, assignment{}
	for t, ps := range a {
		for _, p := range ps {
			if slices.Contains(target[t], p) {
				in[t] = append(in[t], p)
			} else {
				out[t] = append(out[t], p)
			}
		}
	}
	return in, out
}

// merge adds the partitions of b to a (unsorted).
func merge(a, b assignment) {
	for t, ps := range b {
		a[t] = append(a[t], ps...)
	}
}

// equalAssignment reports whether a and b hold the same partitions
// (topics without partitions count as absent).
func equalAssignment(a, b assignment) bool {
	return within(a, b) && within(b, a)
}

// cloneAssignment returns a deep copy of a.
func cloneAssignment(a assignment) assignment {
	out := make(assignment, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}
