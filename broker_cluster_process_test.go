package diskless

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless/cluster/etcdcluster"
	"github.com/diskless-go/diskless/internal/etcdtest"
	"github.com/diskless-go/diskless/internal/s3test"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/kbatch"
)

// The cluster's real-process test: three broker processes (this test
// binary, run again as a child) on one bucket of the real S3 server and a
// real three-member etcd cluster, each serving a small HTTP API over its
// Broker; the parent produces to every partition through all of them,
// idempotent and plain, while it kills the leader of shard 0 with SIGKILL
// and restarts it, kills an etcd member, and freezes a shard leader with
// SIGSTOP past its lease before resuming it (a zombie leader). A history
// checker then reads everything back from every broker.

const clusterChildEnv = "DISKLESS_CLUSTER_CHILD"

// clusterChildConfig is what the parent tells a child.
type clusterChildConfig struct {
	ID        int32
	BucketURL string
	Endpoints []string
	DataDir   string
	Shards    int
}

func (cc clusterChildConfig) config() *Config {
	return &Config{
		BucketURL: cc.BucketURL, DataDir: cc.DataDir, BrokerID: cc.ID, Shards: cc.Shards, Linger: 10 * time.Millisecond,
		DeletionGrace: 2 * time.Second, OrphanGrace: 20 * time.Second, CommitDeadline: 10 * time.Second, OrphanInterval: 2 * time.Second,
		Cluster: &ClusterConfig{Backend: &etcdcluster.Backend{Endpoints: cc.Endpoints}, LeaseTTL: 2 * time.Second},
	}
}

type produceCall struct {
	Topic     string
	Partition int32
	Values    []string
	PID       int64
	Epoch     int16
	Seq       int32
}

type produceAnswer struct {
	BaseOffset int64
	Code       kafkaerr.Code
	Err        string
}

type fetchAnswer struct {
	Offsets []int64
	Values  []string
	HW      int64
	Err     string
}

// clusterChild runs a broker and its HTTP API until it is killed.
func clusterChild(raw string) {
	var cc clusterChildConfig
	if err := json.Unmarshal([]byte(raw), &cc); err != nil {
		panic(err)
	}
	cfg := cc.config()
	logger, _ := zap.NewDevelopment()
	cfg.Logger = logger.Named(fmt.Sprintf("broker-%d", cc.ID))
	ctx := context.Background()
	b, err := Open(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "open: %v\n", err)
		os.Exit(2)
	}
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, v any) { json.NewEncoder(w).Encode(v) }
	mux.HandleFunc("/produce", func(w http.ResponseWriter, r *http.Request) {
		var pc produceCall
		if err := json.NewDecoder(r.Body).Decode(&pc); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		bb := kbatch.NewBuilder(kbatch.CodecNone)
		if pc.PID >= 0 {
			bb.SetProducer(pc.PID, pc.Epoch, pc.Seq)
		}
		for _, v := range pc.Values {
			bb.Append(time.Now().UnixMilli(), nil, []byte(v))
		}
		records, err := bb.Build(nil)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		resp, err := b.Produce(r.Context(), ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: pc.Topic, Partition: pc.Partition, Records: records}}})
		a := produceAnswer{BaseOffset: -1}
		switch {
		case err != nil:
			a.Err, a.Code = err.Error(), kafkaerr.CodeOf(err)
		case resp.Partitions[0].Err != nil:
			a.Err, a.Code = resp.Partitions[0].Err.Error(), kafkaerr.CodeOf(resp.Partitions[0].Err)
		default:
			a.BaseOffset = resp.Partitions[0].BaseOffset
		}
		writeJSON(w, a)
	})
	mux.HandleFunc("/fetch", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		p, _ := strconv.Atoi(q.Get("partition"))
		off, _ := strconv.ParseInt(q.Get("offset"), 10, 64)
		f, err := b.Fetch(r.Context(), FetchRequest{Partitions: []FetchPartition{{Topic: q.Get("topic"), Partition: int32(p), Offset: off, MaxBytes: 1 << 20}}})
		var a fetchAnswer
		if err == nil {
			err = f.Partitions[0].Err
		}
		if err != nil {
			a.Err = err.Error()
			writeJSON(w, a)
			return
		}
		a.HW = f.Partitions[0].HighWatermark
		it := kbatch.NewBatchIter(f.Partitions[0].Records)
		for it.Next() {
			var rr kbatch.RecordReader
			if err := rr.Reset(it.Batch()); err != nil {
				a.Err = err.Error()
				break
			}
			for rr.Next() {
				a.Offsets = append(a.Offsets, rr.Record().Offset)
				a.Values = append(a.Values, string(rr.Record().Value))
			}
		}
		writeJSON(w, a)
	})
	mux.HandleFunc("/latest", func(w http.ResponseWriter, r *http.Request) {
		p, _ := strconv.Atoi(r.URL.Query().Get("partition"))
		res, err := b.ListOffsets(r.Context(), r.URL.Query().Get("topic"), int32(p), LatestTimestamp)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		writeJSON(w, res.Offset)
	})
	mux.HandleFunc("/create", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("partitions"))
		_, err := b.CreateTopic(r.Context(), r.URL.Query().Get("topic"), TopicConfig{Partitions: int32(n)})
		if err != nil && kafkaerr.CodeOf(err) != kafkaerr.TopicAlreadyExists {
			http.Error(w, err.Error(), 500)
		}
	})
	mux.HandleFunc("/delete", func(w http.ResponseWriter, r *http.Request) {
		if err := b.DeleteTopic(r.Context(), r.URL.Query().Get("topic")); err != nil {
			http.Error(w, err.Error(), 500)
		}
	})
	mux.HandleFunc("/pid", func(w http.ResponseWriter, r *http.Request) {
		id, epoch, err := b.InitProducerID(r.Context())
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		writeJSON(w, []int64{id, int64(epoch)})
	})
	mux.HandleFunc("/leaders", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, b.Stats().ShardLeaders)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	tmp := filepath.Join(cc.DataDir, "addr.tmp")
	os.WriteFile(tmp, []byte(ln.Addr().String()), 0o644)
	os.Rename(tmp, filepath.Join(cc.DataDir, "addr"))
	http.Serve(ln, mux)
}

// clusterProc is one broker process.
type clusterProc struct {
	cc   clusterChildConfig
	cmd  *exec.Cmd
	addr atomic.Pointer[string]
	log  *os.File
}

func startClusterProc(t *testing.T, cc clusterChildConfig) *clusterProc {
	p := &clusterProc{cc: cc}
	p.start(t)
	return p
}

func (p *clusterProc) start(t *testing.T) {
	t.Helper()
	raw, _ := json.Marshal(p.cc)
	os.Remove(filepath.Join(p.cc.DataDir, "addr"))
	if p.log == nil {
		var err error
		p.log, err = os.Create(filepath.Join(p.cc.DataDir, "..", fmt.Sprintf("broker-%d.log", p.cc.ID)))
		require.NoError(t, err)
		t.Cleanup(func() { p.log.Close() })
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), clusterChildEnv+"="+string(raw))
	cmd.Stdout, cmd.Stderr = p.log, p.log
	require.NoError(t, cmd.Start())
	p.cmd = cmd
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(p.cc.DataDir, "addr"))
		if err != nil {
			return false
		}
		s := string(b)
		p.addr.Store(&s)
		return true
	}, 60*time.Second, 20*time.Millisecond, "broker %d serves", p.cc.ID)
}

func (p *clusterProc) url(path string) string { return "http://" + *p.addr.Load() + path }

var clusterHTTP = &http.Client{Timeout: 5 * time.Second}

func (p *clusterProc) produce(pc produceCall) (produceAnswer, error) {
	body, _ := json.Marshal(pc)
	resp, err := clusterHTTP.Post(p.url("/produce"), "application/json", bytes.NewReader(body))
	if err != nil {
		return produceAnswer{}, err
	}
	defer resp.Body.Close()
	var a produceAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return a, err
	}
	if a.Err != "" {
		return a, errors.New(a.Err)
	}
	return a, nil
}

func (p *clusterProc) get(path string, v any) error {
	resp, err := clusterHTTP.Get(p.url(path))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return fmt.Errorf("%s: %s", resp.Status, b.String())
	}
	if v == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// clusterHistory is what the producers were told.
type clusterHistory struct {
	mu         sync.Mutex
	acked      map[string]int64 // value -> offset acknowledged
	idempotent map[string]bool
	retried    map[string]bool // plain values sent more than once
}

func TestClusterProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, an S3 server and three broker processes")
	}
	s3 := s3test.Start(t)
	bucketURL := s3.URL("cluster")
	s3.Bucket(t, "cluster") // creates it
	etcd := etcdtest.Start(t, nil)
	root := t.TempDir()
	const shards, partitions = 3, 6
	var procs []*clusterProc
	for i := range 3 {
		dir := filepath.Join(root, fmt.Sprintf("data-%d", i))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		procs = append(procs, startClusterProc(t, clusterChildConfig{ID: int32(i), BucketURL: bucketURL, Endpoints: etcd.Endpoints(), DataDir: dir, Shards: shards}))
	}
	defer func() {
		if t.Failed() {
			for _, p := range procs {
				b, _ := os.ReadFile(p.log.Name())
				t.Logf("broker %d log (tail):\n%s", p.cc.ID, tail(string(b), 60))
			}
		}
	}()
	require.Eventually(t, func() bool { return procs[0].get("/create?topic=h&partitions=6", nil) == nil }, 60*time.Second, 200*time.Millisecond)

	h := &clusterHistory{acked: map[string]int64{}, idempotent: map[string]bool{}, retried: map[string]bool{}}
	stop := make(chan struct{})
	var stopOnce sync.Once
	var wg sync.WaitGroup
	defer func() { // before the test ends, even when it fails
		stopOnce.Do(func() { close(stop) })
		wg.Wait()
	}()
	var acks atomic.Int64
	for g := range 6 {
		idem := g%2 == 0
		wg.Go(func() { clusterProducer(t, procs, g, idem, partitions, h, stop, &acks) })
	}
	waitAcks := func(n int64) {
		start := acks.Load()
		require.Eventually(t, func() bool { return acks.Load() >= start+n }, 90*time.Second, 50*time.Millisecond, "produce goes on")
	}
	waitAcks(50)

	// SIGKILL the leader of shard 0, and restart it.
	var leaders []int32
	require.NoError(t, procs[1].get("/leaders", &leaders))
	victim := procs[leaders[0]]
	t.Logf("killing broker %d, leader of shard 0", victim.cc.ID)
	require.NoError(t, victim.cmd.Process.Kill())
	victim.cmd.Wait()
	waitAcks(50)
	victim.start(t)
	waitAcks(50)

	// SIGKILL an etcd member, and restart it.
	t.Log("killing an etcd member")
	etcd.Kill(1)
	waitAcks(50)
	require.NoError(t, etcd.Restart(1))
	waitAcks(50)

	// Freeze a shard leader past its lease (a zombie), and resume it.
	require.NoError(t, procs[0].get("/leaders", &leaders))
	zombie := procs[leaders[shards-1]]
	t.Logf("freezing broker %d, leader of shard %d", zombie.cc.ID, shards-1)
	require.NoError(t, zombie.cmd.Process.Signal(syscall.SIGSTOP))
	time.Sleep(3 * 2 * time.Second)
	waitAcks(30)
	require.NoError(t, zombie.cmd.Process.Signal(syscall.SIGCONT))
	waitAcks(50)
	stopOnce.Do(func() { close(stop) })
	wg.Wait()
	require.False(t, t.Failed())

	// Every broker holds the same gapless partitions, with every
	// acknowledged record, the idempotent ones exactly once.
	t.Logf("%d acknowledged", acks.Load())
	var first [partitions]map[int64]string
	for _, p := range procs {
		for part := range partitions {
			got := fetchClusterAll(t, p, int32(part))
			for o := range int64(len(got)) {
				require.Contains(t, got, o, "broker %d partition %d: offset %d missing (a gap)", p.cc.ID, part, o)
			}
			if first[part] == nil {
				first[part] = got
				continue
			}
			require.Equal(t, first[part], got, "broker %d partition %d differs", p.cc.ID, part)
		}
	}
	count := map[string]int{}
	where := map[string]int64{}
	for part := range partitions {
		for o, v := range first[part] {
			count[v]++
			where[v] = o
		}
	}
	h.mu.Lock()
	for v, off := range h.acked {
		require.Positive(t, count[v], "acknowledged record %s lost", v)
		if h.idempotent[v] {
			require.Equal(t, 1, count[v], "idempotent record %s more than once", v)
		}
		if !h.retried[v] {
			require.Equal(t, 1, count[v], "record %s, sent once, more than once", v)
			require.Equal(t, off, where[v], "record %s not at the offset acknowledged", v)
		}
	}
	h.mu.Unlock()

	// Nothing leaks: once the topic is gone and the graces have passed,
	// the bucket holds no WAL object.
	require.NoError(t, procs[0].get("/delete?topic=h", nil))
	bkt, err := blob.OpenBucket(t.Context(), bucketURL)
	require.NoError(t, err)
	defer bkt.Close()
	require.Eventually(t, func() bool {
		it := bkt.List(&blob.ListOptions{Prefix: "wal/"})
		_, err := it.Next(t.Context())
		return err != nil
	}, 120*time.Second, time.Second, "every WAL object deleted (dead ones after the grace, orphans after theirs)")
}

// clusterProducer produces batches of two values to the partitions in
// turn, at the brokers in turn, until stop; a failed call is sent again
// (to the next broker) until it is acknowledged, with the same producer
// sequence if idempotent.
func clusterProducer(t *testing.T, procs []*clusterProc, g int, idem bool, partitions int32, h *clusterHistory, stop chan struct{}, acks *atomic.Int64) {
	pid, epoch := int64(-1), int16(0)
	if idem {
		for i := 0; pid < 0; i++ {
			var ids []int64
			if err := procs[(g+i)%len(procs)].get("/pid", &ids); err == nil {
				pid, epoch = ids[0], int16(ids[1])
			} else {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	seq := make([]int32, partitions)
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		part := int32(n) % partitions
		vals := []string{fmt.Sprintf("g%d-n%d-a", g, n), fmt.Sprintf("g%d-n%d-b", g, n)}
		pc := produceCall{Topic: "h", Partition: part, Values: vals, PID: pid, Epoch: epoch, Seq: seq[part]}
		for attempt := 0; ; attempt++ {
			a, err := procs[(g+n+attempt)%len(procs)].produce(pc)
			if err == nil {
				h.mu.Lock()
				for i, v := range vals {
					h.acked[v] = a.BaseOffset + int64(i)
					h.idempotent[v] = idem
					if attempt > 0 {
						h.retried[v] = true
					}
				}
				h.mu.Unlock()
				acks.Add(1)
				break
			}
			if a.Code != 0 && !a.Code.Retriable() && a.Code != kafkaerr.UnknownTopicOrPartition {
				t.Errorf("producer %d: not retriable: %v", g, err)
				return
			}
			if attempt > 200 {
				t.Errorf("producer %d: still failing: %v", g, err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		if idem {
			seq[part] += int32(len(vals))
		}
	}
}

// fetchClusterAll reads a partition from offset 0 to its high watermark,
// as ListOffsets gives it (Fetch, through a follower, may lag it a little).
func fetchClusterAll(t *testing.T, p *clusterProc, part int32) map[int64]string {
	out := map[int64]string{}
	var offset, latest int64 = 0, -1
	for latest < 0 {
		if err := p.get(fmt.Sprintf("/latest?topic=h&partition=%d", part), &latest); err != nil {
			latest = -1
			time.Sleep(100 * time.Millisecond)
		}
	}
	for range 10_000 {
		var a fetchAnswer
		err := p.get(fmt.Sprintf("/fetch?topic=h&partition=%d&offset=%d", part, offset), &a)
		if err == nil && a.Err != "" {
			err = errors.New(a.Err)
		}
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for i, o := range a.Offsets {
			out[o] = a.Values[i]
			offset = max(offset, o+1)
		}
		if offset >= latest {
			return out
		}
		if len(a.Offsets) == 0 {
			time.Sleep(20 * time.Millisecond) // the follower has not applied it yet
		}
	}
	t.Fatalf("broker %d partition %d: could not read to the end", p.cc.ID, part)
	return nil
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}
