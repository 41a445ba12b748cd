package diskless

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/internal/s3test"
	"github.com/diskless-go/diskless/kbatch"
)

// The compaction crash test: a child process runs a broker on a real S3
// server (versitygw) reached through a proxy in the parent, writes a
// compacted partition and compacts it. The proxy watches the bucket
// calls: the compaction's new WAL object goes through, and then the
// metadata log entry that would commit it is either held before it
// reaches the server (the crash between upload and commit) or written and
// its answer held (the crash during the commit). The parent kills the
// child with SIGKILL there, opens a broker on the same data folder and
// bucket, and checks what it serves and what the bucket keeps.

const compactCrashEnv = "DISKLESS_COMPACT_CRASH"

// compactCrashChildConfig is what the child is told, as JSON in
// compactCrashEnv.
type compactCrashChildConfig struct {
	BucketURL, DataDir string
}

func compactCrashConfig(bucketURL, dataDir string) *Config {
	return &Config{BucketURL: bucketURL, DataDir: dataDir, Linger: 5 * time.Millisecond, CompactInterval: -1, OrphanInterval: -1}
}

// compactCrashBatches are the batches the child produces: 60 of random
// keys (of 20), values and tombstones.
func compactCrashBatches() [][]byte {
	rng := rand.New(rand.NewPCG(25, 25))
	now := time.Now().UnixMilli()
	var out [][]byte
	for i := range 60 {
		bld := kbatch.NewBuilder(kbatch.CodecNone)
		for j := range 1 + rng.IntN(8) {
			var val []byte
			if rng.IntN(6) != 0 {
				val = fmt.Appendf(nil, "v%d-%d", i, j)
			}
			bld.Append(now, fmt.Appendf(nil, "k%d", rng.IntN(20)), val)
		}
		data, err := bld.Build(nil)
		if err != nil {
			panic(err)
		}
		out = append(out, data)
	}
	return out
}

// fetchPartition returns the batches of a partition from offset 0 to its high
// watermark, as a consumer reads them.
func fetchPartition(ctx context.Context, b *Broker, topic string, p int32) ([]byte, error) {
	var out []byte
	for from := int64(0); ; {
		f, err := b.Fetch(ctx, FetchRequest{Partitions: []FetchPartition{{Topic: topic, Partition: p, Offset: from, MaxBytes: 1 << 20}}})
		if err != nil {
			return nil, err
		}
		r := f.Partitions[0]
		switch {
		case r.Err != nil:
			return nil, r.Err
		case from >= r.HighWatermark:
			return out, nil
		case len(r.Records) == 0:
			return nil, fmt.Errorf("a fetch at %d below the high watermark %d returned nothing", from, r.HighWatermark)
		}
		out = append(out, r.Records...)
		from = kbatch.LastOffset(r.Records) + 1
	}
}

// compactCrashChild produces the batches, says "ready" with what a
// consumer reads, and compacts the partition when told on stdin; the
// parent kills it before the compaction returns.
func compactCrashChild(raw string) {
	ctx := context.Background()
	fail := func(err error) {
		fmt.Printf("error %v\n", err)
		os.Exit(2)
	}
	var cc compactCrashChildConfig
	if err := json.Unmarshal([]byte(raw), &cc); err != nil {
		fail(err)
	}
	b, err := Open(ctx, compactCrashConfig(cc.BucketURL, cc.DataDir))
	if err != nil {
		fail(err)
	}
	if _, err := b.CreateTopic(ctx, "c", TopicConfig{Partitions: 1, Compact: true, Retention: -1}); err != nil {
		fail(err)
	}
	for _, data := range compactCrashBatches() {
		resp, err := b.Produce(ctx, ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "c", Records: data}}})
		if err == nil {
			err = resp.Partitions[0].Err
		}
		if err != nil {
			fail(err)
		}
	}
	before, err := fetchPartition(ctx, b, "c", 0)
	if err != nil {
		fail(err)
	}
	fmt.Printf("ready %s\n", base64.StdEncoding.EncodeToString(before))
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fail(err)
	}
	_, tp, err := b.partition(ctx, "c", 0)
	if err != nil {
		fail(err)
	}
	st, err := b.CompactPartition(ctx, tp)
	fmt.Printf("compacted %v %v\n", st.Cleaned, err) // too late: the parent kills before
	select {}
}

// crashProxy forwards S3 calls to the server. Once armed, it notes the
// first PUT of a WAL object (the compaction's), and then stops the PUT of
// the metadata log entry that names it (its commit): held, it never
// reaches the server; answerHeld, the server writes it and its answer is
// held. Either way the call hangs until the child dies, and stopped is
// closed.
type crashProxy struct {
	srv        *httptest.Server
	answerHeld bool

	mu      sync.Mutex
	armed   bool
	walKey  string // the compaction's object
	entry   string // the commit's metadata log key
	stopped chan struct{}
	closing chan struct{} // closed when the test ends
}

func startCrashProxy(t *testing.T, target string, answerHeld bool) *crashProxy {
	u, err := url.Parse(target)
	require.NoError(t, err)
	p := &crashProxy{answerHeld: answerHeld, stopped: make(chan struct{}), closing: make(chan struct{})}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host // the host the request was signed for (SigV4)
	}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || r.URL.Query().Has("partNumber") {
			rp.ServeHTTP(w, r)
			return
		}
		path := r.URL.Path
		p.mu.Lock()
		armed, walKey := p.armed && p.entry == "", p.walKey
		if armed && walKey == "" && strings.Contains(path, "/wal/") {
			p.walKey = path[strings.Index(path, "wal/"):]
		}
		p.mu.Unlock()
		if !armed || walKey == "" || !strings.Contains(path, "/meta/") || !strings.Contains(path, "/log/") {
			rp.ServeHTTP(w, r)
			return
		}
		// A metadata log entry: the commit if it names the object (the
		// entry's records are not compressed), else another one, which
		// passes.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return // the child is gone
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte(walKey)) {
			rp.ServeHTTP(w, r)
			return
		}
		p.mu.Lock()
		p.entry = path[strings.Index(path, "meta/"):]
		p.mu.Unlock()
		if p.answerHeld {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK {
				t.Errorf("the commit's entry %s: the server answered %d", p.entry, rec.Code)
			}
		}
		close(p.stopped)
		select {
		case <-r.Context().Done(): // the child is gone
		case <-p.closing:
		}
	}))
	t.Cleanup(func() {
		close(p.closing)
		p.srv.Close()
	})
	return p
}

func (p *crashProxy) arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
}

// TestCompactCrash kills the process compacting a partition between the
// compacted object's upload and its commit, and during the commit (the
// metadata log entry written, its answer never received). A broker opened
// afterwards on the same data folder and bucket serves, for the first,
// the records as they were (and compacts them itself), for the second,
// the compaction's result: in both, the records segment's classic cleaner
// keeps of the same batches, at their offsets, each once. Once the grace
// periods pass, the bucket holds exactly the object that serves them: the
// upload never committed is collected as an orphan, the replaced objects
// are deleted.
func TestCompactCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("a child process on an S3 server")
	}
	srv := s3test.Start(t)
	for _, tc := range []struct {
		name       string
		answerHeld bool
	}{{"between upload and commit", false}, {"during commit", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			name := fmt.Sprintf("compact-crash-%v", tc.answerHeld)
			bucket := srv.Bucket(t, name)
			proxy := startCrashProxy(t, srv.Endpoint, tc.answerHeld)
			proxied := strings.Replace(srv.URL(name), srv.Endpoint, proxy.srv.URL, 1)
			data := filepath.Join(t.TempDir(), "data")

			raw, err := json.Marshal(compactCrashChildConfig{BucketURL: proxied, DataDir: data})
			require.NoError(t, err)
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), compactCrashEnv+"="+string(raw))
			cmd.Stderr = os.Stderr
			stdin, err := cmd.StdinPipe()
			require.NoError(t, err)
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			defer cmd.Process.Kill()
			sc := bufio.NewScanner(out)
			sc.Buffer(nil, 16<<20)
			require.True(t, sc.Scan(), "the child's first line")
			line, ok := strings.CutPrefix(sc.Text(), "ready ")
			require.True(t, ok, "child: %s", sc.Text())
			before, err := base64.StdEncoding.DecodeString(line)
			require.NoError(t, err)
			said := make(chan struct{})
			go func() { // anything else the child says is a failure
				defer close(said)
				for sc.Scan() {
					t.Errorf("child: %s", sc.Text())
				}
			}()

			proxy.arm()
			_, err = fmt.Fprintln(stdin, "compact")
			require.NoError(t, err)
			select {
			case <-proxy.stopped:
			case <-time.After(60 * time.Second):
				t.Fatal("the compaction's commit never reached the proxy")
			}
			require.NoError(t, cmd.Process.Kill()) // SIGKILL
			<-said
			require.Error(t, cmd.Wait())
			stdin.Close()
			uploaded := proxy.walKey
			t.Logf("killed with %s uploaded and its commit %s %s", uploaded, proxy.entry, map[bool]string{false: "held", true: "written, its answer held"}[tc.answerHeld])
			exists, err := bucket.Exists(ctx, uploaded)
			require.NoError(t, err)
			require.True(t, exists, "the compacted object was uploaded")

			// What the classic cleaner keeps of the same batches (with
			// Kafka's delete.retention.ms, the topic's).
			want, end := classicCompacted(t, before, 24*time.Hour, nil)

			cfg := compactCrashConfig(srv.URL(name), data)
			cfg.DeletionGrace, cfg.OrphanGrace = 100*time.Millisecond, 2*time.Second
			b, err := Open(ctx, cfg)
			require.NoError(t, err)
			defer b.Close()
			got, err := fetchPartition(ctx, b, "c", 0)
			require.NoError(t, err)
			_, tp, err := b.partition(ctx, "c", 0)
			require.NoError(t, err)
			keep := uploaded // the object that serves the partition at the end
			if !tc.answerHeld {
				require.Equal(t, keyedRecords(t, before), keyedRecords(t, got), "the compaction never committed: the records as they were")
				st, err := b.CompactPartition(ctx, tp)
				require.NoError(t, err)
				require.True(t, st.Cleaned)
				got, err = fetchPartition(ctx, b, "c", 0)
				require.NoError(t, err)
				keys := walKeys(t, bucket, "")
				keep = keys[len(keys)-1] // the newest
				require.NotEqual(t, uploaded, keep, "the orphan is not the newest")
			}
			require.Equal(t, keyedRecords(t, want), keyedRecords(t, got), "the records the classic cleaner keeps, at their offsets")
			lo, err := b.ListOffsets(ctx, "c", 0, LatestTimestamp)
			require.NoError(t, err)
			require.Equal(t, end, lo.Offset)

			// Nothing leaks: the orphan goes, and the replaced objects.
			deadline := time.Now().Add(60 * time.Second)
			var keys []string
			for {
				_, err := b.CollectOrphans(ctx)
				require.NoError(t, err)
				if keys = walKeys(t, bucket, ""); slices.Equal(keys, []string{keep}) || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond) // the lifecycle and the grace: nothing to wait on
			}
			require.Equal(t, []string{keep}, keys, "only the object that serves the partition is left")
			got, err = fetchPartition(ctx, b, "c", 0)
			require.NoError(t, err)
			require.Equal(t, keyedRecords(t, want), keyedRecords(t, got), "and it serves them")
			s := b.Stats()
			t.Logf("afterwards: %d records at their offsets; %d objects deleted by the lifecycle, %d orphans collected", len(keyedRecords(t, got)), s.ObjectsDeleted, s.OrphansDeleted)
			if !tc.answerHeld {
				require.Positive(t, s.OrphansDeleted)
			}
		})
	}
}
