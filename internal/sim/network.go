package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/diskless-go/diskless/cluster"
)

// Network is the network between the brokers of a simulated cluster:
// each broker's cluster.Transport is the Service's cluster.Mem seen
// through it. Its faults are what a network can do to the TCP transport
// (cluster/tcp.go), no more: a link or a broker cut off (calls fail, as
// on a refused or reset connection), calls delayed, and answers lost
// (the call was served, and the connection broke before its answer came
// back: the caller gets cluster.ErrConnectionLost and cannot tell). TCP
// neither duplicates nor reorders the calls of one connection, and
// cluster/transport.go promises the order of one goroutine's calls to
// one address, so neither is done here. Which answers are lost is drawn
// by a hash of the seed, the link, the method and how many such calls
// came before, as the store's rules are (faults.go). It is safe for
// concurrent use.
type Network struct {
	seed  uint64
	inner *cluster.Mem

	mu struct {
		sync.Mutex
		owner    map[string]int // listen address → broker
		cut      map[[2]int]int // links cut (lower broker first), counted: cuts nest
		isolated map[int]int    // brokers cut off from all, counted
		delay    map[int]time.Duration
		lost     map[int]float64
		calls    map[string]uint64
	}
}

func newNetwork(seed uint64, inner *cluster.Mem) *Network {
	n := &Network{seed: seed, inner: inner}
	n.mu.owner = map[string]int{}
	n.mu.cut = map[[2]int]int{}
	n.mu.isolated = map[int]int{}
	n.mu.delay = map[int]time.Duration{}
	n.mu.lost = map[int]float64{}
	n.mu.calls = map[string]uint64{}
	return n
}

// link names the link between brokers a and b, the lower first.
func link(a, b int) [2]int {
	if a > b {
		a, b = b, a
	}
	return [2]int{a, b}
}

// Cut cuts the link between brokers a and b, both ways, until the
// returned func heals it.
func (n *Network) Cut(a, b int) (heal func()) {
	l := link(a, b)
	n.set(func() { n.mu.cut[l]++ })
	var once sync.Once
	return func() { once.Do(func() { n.set(func() { n.mu.cut[l]-- }) }) }
}

// Isolate cuts broker b off from every other until the returned func
// heals it.
func (n *Network) Isolate(b int) (heal func()) {
	n.set(func() { n.mu.isolated[b]++ })
	var once sync.Once
	return func() { once.Do(func() { n.set(func() { n.mu.isolated[b]-- }) }) }
}

// Delay delays every call from or to broker b by d, until the returned
// func ends it (a call between two delayed brokers waits the longer).
func (n *Network) Delay(b int, d time.Duration) (end func()) {
	n.set(func() { n.mu.delay[b] = d })
	return func() { n.set(func() { delete(n.mu.delay, b) }) }
}

// LoseAnswers loses the answers of a share rate of the calls from or to
// broker b, until the returned func ends it.
func (n *Network) LoseAnswers(b int, rate float64) (end func()) {
	n.set(func() { n.mu.lost[b] = rate })
	return func() { n.set(func() { delete(n.mu.lost, b) }) }
}

// Heal ends every fault of the network.
func (n *Network) Heal() {
	n.set(func() {
		clear(n.mu.cut)
		clear(n.mu.isolated)
		clear(n.mu.delay)
		clear(n.mu.lost)
	})
}

func (n *Network) set(f func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f()
}

// route says what the network does to a call from broker from to addr
// now: whether it is cut, how long it is delayed, whether its answer is
// lost.
func (n *Network) route(from int, addr, method string) (to int, cut bool, delay time.Duration, lost bool) {
	n.mu.Lock()
	to, known := n.mu.owner[addr]
	if !known {
		n.mu.Unlock()
		return -1, false, 0, false
	}
	cut = n.mu.cut[link(from, to)] > 0 || n.mu.isolated[from] > 0 || n.mu.isolated[to] > 0
	delay = max(n.mu.delay[from], n.mu.delay[to])
	rate := max(n.mu.lost[from], n.mu.lost[to])
	if cut || rate == 0 {
		n.mu.Unlock()
		return to, cut, delay, false
	}
	k := fmt.Sprintf("%d>%d %s", from, to, method)
	n.mu.calls[k]++
	count := n.mu.calls[k]
	n.mu.Unlock()
	h := fnv.New64a()
	fmt.Fprintf(h, "net %d %s %d", n.seed, k, count)
	u := float64(mix(h.Sum64())>>11) / (1 << 53)
	return to, false, delay, u < rate
}

// transport returns broker from's view of the network.
func (n *Network) transport(from int) cluster.Transport {
	return &netTransport{n: n, from: from}
}

// netTransport is one broker's cluster.Transport through a Network.
type netTransport struct {
	n    *Network
	from int
}

var _ cluster.Transport = (*netTransport)(nil)

// Listen implements cluster.Transport: it listens on the Mem and
// records whose address it is.
func (t *netTransport) Listen(addr string, h cluster.Handler) (cluster.Server, error) {
	srv, err := t.n.inner.Listen(addr, h)
	if err != nil {
		return nil, err
	}
	t.n.set(func() { t.n.mu.owner[srv.Addr()] = t.from })
	return srv, nil
}

// Call implements cluster.Transport with the network's faults. A delay
// is spent before the call is handed on, in the caller's goroutine, so
// that one goroutine's calls keep their order.
func (t *netTransport) Call(ctx context.Context, addr string, shard int, method string, body []byte) func() ([]byte, error) {
	fail := func(err error) func() ([]byte, error) { return func() ([]byte, error) { return nil, err } }
	to, cut, delay, lost := t.n.route(t.from, addr, method)
	if delay > 0 && !cut {
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return fail(ctx.Err())
		}
		to, cut, _, lost = t.n.route(t.from, addr, method)
	}
	if cut {
		return fail(fmt.Errorf("sim: the network cuts broker %d off from broker %d: %w", t.from, to, cluster.ErrConnectionLost))
	}
	wait := t.n.inner.Call(ctx, addr, shard, method, body)
	if !lost {
		return wait
	}
	return func() ([]byte, error) {
		if _, err := wait(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("sim: the network lost broker %d's answer to broker %d: %w", to, t.from, cluster.ErrConnectionLost)
	}
}

// Close implements cluster.Transport: the Mem is the Service's, shared,
// and stays open.
func (t *netTransport) Close() error { return nil }
