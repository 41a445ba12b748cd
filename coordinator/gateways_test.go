package coordinator

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// gatewayLoads counts, per rack and broker, the shards it is the gateway
// of.
func gatewayLoads(gw map[string][]int32) map[string]map[int32]int {
	out := map[string]map[int32]int{}
	for rack, shards := range gw {
		out[rack] = map[int32]int{}
		for _, id := range shards {
			out[rack][id]++
		}
	}
	return out
}

// TestGatewaysOneBrokerPerRack: 3 racks, one broker each, 12 shards: each
// broker is the gateway of all 12 shards of its rack.
func TestGatewaysOneBrokerPerRack(t *testing.T) {
	brokers := []BrokerInfo{{1, "a"}, {2, "b"}, {3, "c"}}
	gw := Gateways(brokers, 12)
	require.Len(t, gw, 3)
	for _, b := range brokers {
		require.Len(t, gw[b.Rack], 12)
		for s, id := range gw[b.Rack] {
			require.Equal(t, b.ID, id, "rack %s shard %d", b.Rack, s)
		}
	}
}

// TestGatewaysEnoughBrokers: with at least as many brokers in a rack as
// shards, no broker is the gateway of more than one shard in its rack, so
// an object of one gateway needs one commit call.
func TestGatewaysEnoughBrokers(t *testing.T) {
	var brokers []BrokerInfo
	for r, rack := range []string{"a", "b", "c"} {
		for i := range 12 {
			brokers = append(brokers, BrokerInfo{ID: int32(100*r + i), Rack: rack})
		}
	}
	gw := Gateways(brokers, 12)
	for rack, loads := range gatewayLoads(gw) {
		require.Len(t, loads, 12, "rack %s: every broker gets one", rack)
		for id, n := range loads {
			require.Equal(t, 1, n, "rack %s broker %d", rack, id)
		}
	}
	// More brokers than shards: still at most one each.
	gw = Gateways(append(brokers, BrokerInfo{ID: 999, Rack: "a"}), 12)
	for _, n := range gatewayLoads(gw)["a"] {
		require.Equal(t, 1, n)
	}
}

// TestGatewaysRandom: any brokers and shard count: every rack with brokers
// has a gateway from that rack for every shard, each broker's share is
// within one of the ideal, the answer does not depend on the brokers'
// order, and a broker joining moves few shards.
func TestGatewaysRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for iter := 0; iter < 300; iter++ {
		shards := rng.IntN(40)
		racks := rng.IntN(4) + 1
		var brokers []BrokerInfo
		for i := rng.IntN(30) + 1; i > 0; i-- {
			brokers = append(brokers, BrokerInfo{ID: int32(rng.IntN(1000)), Rack: fmt.Sprint("r", rng.IntN(racks))})
		}
		gw := Gateways(brokers, shards)
		rackOf := map[int32]string{}
		perRack := map[string]int{}
		for _, b := range brokers {
			if _, ok := rackOf[b.ID]; !ok {
				rackOf[b.ID] = b.Rack
				perRack[b.Rack]++
			}
		}
		require.Len(t, gw, len(perRack))
		for rack, ids := range gw {
			require.Len(t, ids, shards)
			for _, id := range ids {
				require.Equal(t, rack, rackOf[id], "a gateway from another rack")
			}
			loads := gatewayLoads(gw)[rack]
			b := perRack[rack]
			for id := range rackOf {
				if rackOf[id] != rack {
					continue
				}
				n := loads[id]
				require.GreaterOrEqual(t, n, shards/b, "iter %d rack %s broker %d", iter, rack, id)
				require.LessOrEqual(t, n, (shards+b-1)/b, "iter %d rack %s broker %d", iter, rack, id)
			}
		}
		shuffled := append([]BrokerInfo(nil), brokers...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if len(rackOf) == len(brokers) { // no duplicate IDs: order cannot matter
			require.Equal(t, gw, Gateways(shuffled, shards))
		}
	}

	// Stability: a broker joining a rack of 10 with 100 shards takes its
	// share, and most other shards keep their gateway.
	var brokers []BrokerInfo
	for i := range 10 {
		brokers = append(brokers, BrokerInfo{ID: int32(i), Rack: "a"})
	}
	before := Gateways(brokers, 100)["a"]
	after := Gateways(append(brokers, BrokerInfo{ID: 10, Rack: "a"}), 100)["a"]
	moved := 0
	for s := range before {
		if before[s] != after[s] {
			moved++
		}
	}
	require.GreaterOrEqual(t, moved, 9, "the new broker takes its share")
	require.Less(t, moved, 50, "most shards keep their gateway")
	t.Logf("%d of 100 shards moved when an 11th broker joined", moved)
}
