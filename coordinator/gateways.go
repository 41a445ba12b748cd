package coordinator

import (
	"cmp"
	"slices"
)

// BrokerInfo is a broker as produce gateways see it: its ID and its rack
// ("" is a rack too: the brokers that name none).
type BrokerInfo struct {
	ID   int32
	Rack string
}

// Gateways assigns produce gateways, KIP-1163's PreferredProduceBrokers:
// for each rack that has brokers, and each shard, the broker of that rack
// that producers in the rack should send that shard's partitions to.
// gw[rack][shard] is its ID. A broker that takes the produce traffic of
// fewer shards commits each object it uploads to fewer shards: with one
// shard per broker, one commit call per object (Stats.CommitCalls
// counts them).
//
// Within each rack the shards are spread evenly: with b brokers and n
// shards, every broker is the gateway of n/b shards, rounded down or up.
// So with 3 racks of 1 broker and 12 shards, each broker is the gateway of
// all 12 shards of its rack; with at least as many brokers in a rack as
// shards, no broker is the gateway of more than one. Which broker gets
// which shard is decided by rendezvous hashing of (shard, broker) under
// that bound, so when a broker joins or leaves, most shards keep their
// gateway.
//
// It is a pure function: the same brokers (in any order) and shard count
// give the same answer on every broker. A broker ID listed twice counts
// once, in the rack of its first listing.
func Gateways(brokers []BrokerInfo, shards int) map[string][]int32 {
	shards = max(shards, 0)
	racks := map[string][]int32{}
	seen := map[int32]bool{}
	for _, b := range brokers {
		if !seen[b.ID] {
			seen[b.ID] = true
			racks[b.Rack] = append(racks[b.Rack], b.ID)
		}
	}
	out := make(map[string][]int32, len(racks))
	for rack, ids := range racks {
		slices.Sort(ids)
		out[rack] = assignGateways(ids, shards)
	}
	return out
}

// assignGateways gives each shard one of ids: each shard, in order, the
// broker it ranks highest among those that can still take one. Every
// broker is to end with floor or floor+1 shards, and only n mod b of them
// with floor+1: a broker can take one while it has fewer than floor, or
// has floor and fewer than n mod b brokers have taken an extra one. Some
// broker always can (the shards given so far are fewer than n), and in
// the end every broker has floor or floor+1.
func assignGateways(ids []int32, shards int) []int32 {
	b := len(ids)
	floor, extra := shards/b, shards%b
	load := make([]int, b)
	extras := 0
	out := make([]int32, shards)
	order := make([]int, b)
	for s := range shards {
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(x, y int) int {
			return cmp.Or(cmp.Compare(gatewayRank(s, ids[y]), gatewayRank(s, ids[x])), cmp.Compare(ids[x], ids[y]))
		})
		pick := -1
		for _, i := range order {
			if load[i] < floor {
				pick = i
				break
			}
		}
		if pick < 0 {
			for _, i := range order {
				if load[i] == floor && extras < extra {
					pick = i
					extras++
					break
				}
			}
		}
		load[pick]++
		out[s] = ids[pick]
	}
	return out
}

// gatewayRank is the rendezvous weight of broker id for shard: a
// splitmix64 of both, so that every broker computes the same.
func gatewayRank(shard int, id int32) uint64 {
	x := uint64(shard)<<32 | uint64(uint32(id))
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
