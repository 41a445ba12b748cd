package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/clock"
	"github.com/diskless-go/diskless/cluster"
	"github.com/diskless-go/diskless/cluster/memcluster"
	"github.com/diskless-go/diskless/faultbucket"
)

// ClusterOptions configure a Cluster.
type ClusterOptions struct {
	// Brokers is how many brokers to run; 0 means 1. One broker runs
	// alone (no Config.Cluster); more run as one cluster on a
	// memcluster.Service made by NewCluster (so, inside the bubble when
	// NewCluster is called in one), over its in-memory transport behind
	// a Network of seeded faults.
	Brokers int
	// Shards is each broker's Config.Shards when Brokers > 1; 0 means 3.
	Shards int
	// LeaseTTL is the cluster's ClusterConfig.LeaseTTL; 0 means 5 s.
	LeaseTTL time.Duration
	// Skew is the largest clock skew between brokers: each broker of a
	// cluster gets a Config.Clock that is the system clock (virtual in a
	// bubble) offset by a seeded amount in [-Skew, Skew]. Timers still
	// run at the rate of the one clock: skew, not drift.
	Skew time.Duration
	// WrapBackend, if set, wraps the Service as the brokers' Backend:
	// the tests put a deliberately broken one there.
	WrapBackend func(*memcluster.Service) cluster.Backend
	// Dir holds the brokers' data folders; required.
	Dir string
	// Seed seeds each broker process's faultbucket.
	Seed uint64
	// WrapStore, if set, wraps the shared store once, under every
	// broker's faultbucket: the tests put a deliberately broken store
	// there to prove that the checker catches what it breaks.
	WrapStore func(*blob.Bucket) *blob.Bucket
	// Config, if set, adjusts each broker's Config before it opens.
	Config func(*diskless.Config)
}

// Cluster is the brokers of a simulation over one shared object store.
// Each broker process sees the store through a faultbucket of its own, so
// that a crash cuts that process off the store without touching the
// store. It is safe for concurrent use.
type Cluster struct {
	opts  ClusterOptions
	store *blob.Bucket // the shared store (WrapStore applied)
	mem   *blob.Bucket // the memblob under it
	nodes []*node
	svc   *memcluster.Service // nil for one broker
	net   *Network            // nil for one broker
	// objects is what the processes did to the store's WAL objects.
	objects *objectLog
}

// node is one broker and its current process.
type node struct {
	id  int
	dir string

	mu struct {
		sync.Mutex
		b       *diskless.Broker // nil while down
		faults  *faultbucket.Faults
		bucket  *blob.Bucket
		process int // incarnation, from 0
		// member is the current process's membership of the cluster,
		// nil for a broker alone.
		member *memberHolder
	}
}

// NewCluster opens the store and starts the brokers.
func NewCluster(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
	if opts.Brokers == 0 {
		opts.Brokers = 1
	}
	if opts.Brokers < 0 {
		return nil, fmt.Errorf("sim: ClusterOptions.Brokers %d is negative", opts.Brokers)
	}
	if opts.Dir == "" {
		return nil, errors.New("sim: ClusterOptions.Dir is required")
	}
	opts.Shards = cmp.Or(opts.Shards, 3)
	opts.LeaseTTL = cmp.Or(opts.LeaseTTL, 5*time.Second)
	c := &Cluster{opts: opts, mem: memblob.OpenBucket(nil), objects: newObjectLog()}
	if opts.Brokers > 1 {
		c.svc = memcluster.NewService(nil)
		c.net = newNetwork(opts.Seed, c.svc.Transport())
	}
	c.store = c.mem
	if opts.WrapStore != nil {
		c.store = opts.WrapStore(c.mem)
	}
	for i := range opts.Brokers {
		n := &node{id: i, dir: filepath.Join(opts.Dir, fmt.Sprintf("broker-%d", i))}
		c.nodes = append(c.nodes, n)
		if err := c.start(ctx, n); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// start opens a new process of broker n behind a fresh faultbucket.
func (c *Cluster) start(ctx context.Context, n *node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	process := n.mu.process
	watched := watch(c.store, c.objects, n.id)
	bucket, faults, err := faultbucket.Wrap(watched, &faultbucket.Options{Seed: c.opts.Seed ^ uint64(n.id)<<32 ^ uint64(process)})
	if err != nil {
		return err
	}
	cfg := &diskless.Config{
		Bucket:          bucket,
		DataDir:         n.dir,
		BrokerID:        int32(n.id),
		Linger:          50 * time.Millisecond,
		CompactInterval: time.Minute,
	}
	var member *memberHolder
	if c.svc != nil {
		var backend cluster.Backend = c.svc
		if c.opts.WrapBackend != nil {
			backend = c.opts.WrapBackend(c.svc)
		}
		member = &memberHolder{}
		backend = &memberBackend{Backend: backend, h: member}
		cfg.Shards = c.opts.Shards
		if c.opts.Skew > 0 {
			cfg.Clock = skewedClock(c.skew(n.id))
		}
		cfg.Cluster = &diskless.ClusterConfig{Backend: backend, LeaseTTL: c.opts.LeaseTTL, Transport: c.net.transport(n.id)}
	}
	if c.svc == nil && (c.opts.Seed>>2)%4 == 0 {
		// A quarter of the runs of a broker alone commit in series; the
		// others in parallel, the default with the metadata log in the
		// bucket (docs/parallel-commit.md).
		cfg.Commit = diskless.CommitInSeries
	}
	if c.svc == nil && c.opts.Seed%4 == 0 {
		// A quarter of the runs of a broker alone tier their partitions
		// (Offload is for one broker per bucket): the workload's topics
		// roll small segments (topicConfig), and a short local retention
		// sends reads of older offsets to the tiered ones.
		cfg.Offload, cfg.LocalRetention, cfg.OffloadInterval = true, 5*time.Minute, 5*time.Second
	}
	if c.opts.Config != nil {
		c.opts.Config(cfg)
	}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	b, err := diskless.Open(ctx, cfg)
	if err != nil {
		bucket.Close()
		return fmt.Errorf("sim: opening broker %d (process %d): %w", n.id, process, err)
	}
	n.mu.b, n.mu.faults, n.mu.bucket, n.mu.member = b, faults, bucket, member
	return nil
}

// skew is broker id's clock offset, drawn from the seed.
func (c *Cluster) skew(id int) time.Duration {
	r := mix(c.opts.Seed ^ uint64(id+1)*0x9e3779b97f4a7c15)
	return time.Duration(r%uint64(2*c.opts.Skew+1)) - c.opts.Skew
}

// skewedClock is the system clock offset by a fixed amount.
type skewedClock time.Duration

func (s skewedClock) Now() time.Time { return time.Now().Add(time.Duration(s)) }

func (s skewedClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return time.AfterFunc(d, f)
}

// Service returns the metadata service of a cluster of several brokers
// (its fault hooks), nil for one broker.
func (c *Cluster) Service() *memcluster.Service { return c.svc }

// Network returns the network between the brokers of a cluster of
// several (its fault hooks), nil for one broker.
func (c *Cluster) Network() *Network { return c.net }

// Brokers returns how many brokers the cluster has.
func (c *Cluster) Brokers() int { return len(c.nodes) }

// Broker returns broker i's current process, nil while it is down.
func (c *Cluster) Broker(i int) *diskless.Broker {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.b
}

// Faults returns the fault controller of broker i's current process, nil
// while it is down.
func (c *Cluster) Faults(i int) *faultbucket.Faults {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.b == nil {
		return nil
	}
	return n.mu.faults
}

// Crash ends broker i's process as a crash (a SIGKILL) would: its
// faultbucket fails every call that starts from now on (calls already
// past it land, or not, as they would on the wire), and in a cluster its
// membership is killed (memcluster.Node.Kill): the metadata service is
// told nothing, so the process's lease, registration and leaderships
// stay until the lease's TTL runs out, and its leaders' appends fail.
// Then the process is closed, which answers what it still buffered with
// errors since nothing more reaches the store or the metadata service.
// Its data folder stays as it is, unless wipe removes it (a lost disk).
// The broker is down until Restart.
func (c *Cluster) Crash(i int, wipe bool) error { return c.stop(i, crashKill, wipe) }

// CrashRevoking ends broker i's process as Crash does, except that its
// membership is closed rather than killed: its lease is revoked at once,
// as a process that crashed after its client said goodbye to the
// metadata service would leave it (the crash of the simulation before
// Crash killed the membership).
func (c *Cluster) CrashRevoking(i int, wipe bool) error { return c.stop(i, crashRevoke, wipe) }

// Stop closes broker i's process cleanly (what it buffered is flushed),
// and removes its data folder if wipe is set. The broker is down until
// Restart.
func (c *Cluster) Stop(i int, wipe bool) error { return c.stop(i, cleanStop, wipe) }

// How stop ends a process.
const (
	cleanStop   = iota // Close: flushed, the lease revoked
	crashKill          // the store cut off, the membership killed, then Close
	crashRevoke        // the store cut off, then Close (the lease revoked)
)

func (c *Cluster) stop(i int, how int, wipe bool) error {
	n := c.nodes[i]
	n.mu.Lock()
	b, faults, bucket, member := n.mu.b, n.mu.faults, n.mu.bucket, n.mu.member
	n.mu.b, n.mu.member = nil, nil
	n.mu.process++
	n.mu.Unlock()
	if b == nil {
		return nil
	}
	if how != cleanStop {
		faults.SetHook(func(faultbucket.Op, string) *faultbucket.Error { return &faultbucket.Error{} })
		faults.Outage(1 << 62)
	}
	if how == crashKill && member != nil {
		member.kill()
	}
	err := b.Close()
	bucket.Close()
	if wipe {
		err = errors.Join(err, os.RemoveAll(n.dir))
	}
	return err
}

// memberHolder keeps the cluster.Node one broker process joined with,
// so that a crash can kill it. It is safe for concurrent use.
type memberHolder struct {
	mu   sync.Mutex
	node cluster.Node
}

// killer is what memcluster.Node offers a crash: ending the process's
// membership without telling the metadata service.
type killer interface{ Kill() }

// kill kills the membership, if the process has joined; a Node that
// cannot be killed (a wrapper's) is left to the process's Close.
func (h *memberHolder) kill() {
	h.mu.Lock()
	nd := h.node
	h.mu.Unlock()
	if k, ok := nd.(killer); ok {
		k.Kill()
	}
}

// memberBackend is the Backend a broker process sees: the cluster's,
// with the Node the process joins with kept in h.
type memberBackend struct {
	cluster.Backend
	h *memberHolder
}

func (b *memberBackend) Connect(ctx context.Context, opts *cluster.ConnectOptions) (cluster.Conn, error) {
	conn, err := b.Backend.Connect(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &memberConn{Conn: conn, h: b.h}, nil
}

// memberConn keeps the Node its Join returns.
type memberConn struct {
	cluster.Conn
	h *memberHolder
}

func (c *memberConn) Join(ctx context.Context, opts *cluster.JoinOptions, cb cluster.Callbacks) (cluster.Node, error) {
	nd, err := c.Conn.Join(ctx, opts, cb)
	if err == nil {
		c.h.mu.Lock()
		c.h.node = nd
		c.h.mu.Unlock()
	}
	return nd, err
}

// Restart starts a new process of broker i, which must be down.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	return c.start(ctx, c.nodes[i])
}

// Close closes every broker (flushing what they buffered) and the store.
func (c *Cluster) Close() error {
	var errs []error
	for _, n := range c.nodes {
		n.mu.Lock()
		b, bucket := n.mu.b, n.mu.bucket
		n.mu.b = nil
		n.mu.Unlock()
		if b != nil {
			errs = append(errs, b.Close(), bucket.Close())
		}
	}
	if c.store != c.mem {
		errs = append(errs, c.store.Close())
	}
	errs = append(errs, c.mem.Close())
	return errors.Join(errs...)
}
