package sim

import (
	"fmt"
	"time"
)

// The faults of a cluster of several brokers, besides the store's and
// the crashes (faults.go): first the metadata service's
// (memcluster.Service's hooks, cluster/memcluster/faults.go), then the
// network's (Network).
const (
	numClusterFaults = 5
	numNetFaults     = 4
)

// clusterFault injects the cluster fault k (of numClusterFaults, then
// numNetFaults) at broker node, for about d where it lasts, and returns
// its note for the trace. What lasts is undone by later, so that the
// final read finds the cluster whole.
func (a *actor) clusterFault(k, node int, d time.Duration) string {
	c := a.w.c
	svc, net := c.Service(), c.Network()
	id := int32(node)
	switch k {
	case 0:
		// The lease ends early, as if the broker had been paused past
		// its TTL: its leaderships end and it registers again.
		return fmt.Sprintf("lease expired (had one: %v)", svc.ExpireLease(id))
	case 1:
		// A zombie: its renewals are lost and its watch stalls past its
		// lease, while the actors go on calling it; whatever it still
		// appends as a leader must be fenced.
		pause := c.opts.LeaseTTL + time.Duration(a.rng.IntN(20000))*time.Millisecond
		svc.PauseLease(id)
		a.later(pause, func() { svc.ResumeLease(id) })
		return fmt.Sprintf("zombie: lease paused for %v", pause)
	case 2:
		shard := a.rng.IntN(c.opts.Shards)
		who, ok := svc.Depose(shard)
		return fmt.Sprintf("shard %d's leader deposed (%d, had one: %v)", shard, who, ok)
	case 3:
		delay := time.Duration(50+a.rng.IntN(3000)) * time.Millisecond
		svc.SetWatchDelay(delay)
		a.later(d, func() { svc.SetWatchDelay(0) })
		return fmt.Sprintf("watch delay %v for %v", delay, d)
	case 4:
		n := 1 + a.rng.IntN(8)
		svc.FailNext(id, n, nil)
		return fmt.Sprintf("metadata service fails the next %d operations", n)
	case 5:
		other := (node + 1 + a.rng.IntN(c.Brokers()-1)) % c.Brokers()
		a.later(d, net.Cut(node, other))
		return fmt.Sprintf("link to broker %d cut for %v", other, d)
	case 6:
		d /= 3
		a.later(d, net.Isolate(node))
		return fmt.Sprintf("isolated for %v", d)
	case 7:
		delay := time.Duration(10+a.rng.IntN(2000)) * time.Millisecond
		a.later(d, net.Delay(node, delay))
		return fmt.Sprintf("calls delayed %v for %v", delay, d)
	default:
		rate := 0.1 + 0.5*a.rng.Float64()
		a.later(d, net.LoseAnswers(node, rate))
		return fmt.Sprintf("lost call answers %.2f for %v", rate, d)
	}
}
