// Command kafka-broker is a Kafka broker over the diskless
// Broker facade: unmodified Kafka clients (franz-go, librdkafka, the Java
// client) produce to it, consume from it, and run consumer groups on it,
// while every record lives in WAL objects in a gocloud.dev/blob bucket and
// a batch coordinator assigns the offsets.
//
//	go run ./examples/kafka-broker                                # a throwaway broker on 127.0.0.1:9092
//	go run ./examples/kafka-broker -data /var/lib/kb              # keeps its data: bucket in /var/lib/kb/bucket
//	go run ./examples/kafka-broker -data /var/lib/kb -bucket 's3://my-bucket?region=eu-west-1'
//	kcat -b 127.0.0.1:9092 -L                                     # any Kafka client
//
// Flags:
//
//	-addr HOST:PORT      where to listen (default 127.0.0.1:9092); port 0 picks one
//	-advertise HOST:PORT the address clients are told to connect to (default: the listener's);
//	                     -advertised-addr is the same
//	-data DIR            the local data folder: caches and the coordinator's SQLite
//	                     database (default: a temporary folder, removed on exit)
//	-bucket URL          the bucket (default: file://DIR/bucket, a folder in the data folder);
//	                     file://, mem:// and s3:// are built in
//	-node-id N           the broker's node ID (default 0): the Kafka node ID, unique in a cluster
//	-etcd ENDPOINTS      comma-separated etcd addresses: one node of a cluster of stateless
//	                     nodes on one bucket (default: none, a single node); needs -bucket
//	-peer-addr HOST:PORT with -etcd, where the node listens for the calls other nodes
//	                     forward to it (default 127.0.0.1:0: a free port, fine on one machine)
//	-peer-versions LIST  with -etcd, keeps the node to older versions of the calls between
//	                     nodes, as METHOD=VERSION pairs (commit=1): a staged upgrade, or a
//	                     test of one (default: every version this release speaks)
//	-features LIST       with -etcd, keeps the node to lower feature levels, as NAME=LEVEL pairs
//	                     (diskless.version=1): a test of an upgrade (default: this release's)
//	-rack NAME           the node's rack (availability zone); clients that say theirs are
//	                     sent to a node of it
//	-lease-ttl D         with -etcd, how long a node that stopped renewing its etcd lease
//	                     (it died) is still named (default 5s)
//	-etcd-ca FILE        with -etcd, connect to etcd over TLS, trusting the PEM CAs in FILE
//	                     (alone: server-only TLS)
//	-etcd-cert FILE -etcd-key FILE
//	                     with -etcd, connect over TLS with this PEM client certificate and key
//	                     (etcd's --client-cert-auth)
//	-etcd-user USER      with -etcd, act as this etcd user (etcd with authentication on); the
//	                     password is in $DISKLESS_ETCD_PASSWORD (-etcd-password PASSWORD
//	                     also takes it, but shows it in the process list)
//	-peer-tls-cert FILE -peer-tls-key FILE -peer-tls-ca FILE
//	                     with -etcd, mutual TLS for the calls between nodes (all three or
//	                     none): this node's PEM certificate and key, which must name it with
//	                     the URI SAN diskless-node:<-node-id>, and the cluster CA that signs
//	                     every node's; a node then serves only nodes with a certificate of
//	                     that CA, and calls a node only if its certificate names the node
//	                     etcd says it is. Without them the calls are plaintext and
//	                     unauthenticated, and the node warns at start
//	-linger D            how long a WAL object waits for more produce requests (default 250ms)
//	-objects-per-second N
//	                     the PUT budget of WAL objects that are not full: an object closes
//	                     as soon as the budget allows, so a lone request is uploaded at once
//	                     (default 0: one object a linger, 4 a second)
//	-metadata-log WHERE  bucket (default) or file: where the coordinator's metadata log lives
//	-commit HOW          auto (default), series or parallel: whether a WAL object's PUT and
//	                     the log entry that commits it go at once (auto: with the bucket
//	                     log on a single node) or one after the other (docs/parallel-commit.md)
//	-auto-create-topics  create unknown topics on Metadata requests that allow it (default true)
//	-partitions N        partitions of auto-created topics and of CreateTopics with -1 (default 1)
//	-group-initial-rebalance-delay D
//	                     how long the first rebalance of an empty group waits for more
//	                     members (default 3s, Kafka's group.initial.rebalance.delay.ms)
//	-consumer-group-heartbeat-interval D
//	                     the heartbeat interval the coordinator tells members of KIP-848
//	                     consumer groups (default 5s, Kafka's group.consumer.heartbeat.interval.ms)
//	-consumer-group-session-timeout D
//	                     how long such a member may go without a heartbeat before it is
//	                     removed (default 45s, Kafka's group.consumer.session.timeout.ms)
//	-offsets-topic-mirror
//	                     write every offset commit to __consumer_offsets in Kafka's record
//	                     format too, for tools that read that topic, as Burrow does
//	                     (default false: committed offsets live in the coordinator alone)
//	-log-level LEVEL     debug, info (default), warn, error; logs go to stderr
//	-metrics-addr HOST:PORT
//	                     serve the Broker's metrics (OpenTelemetry, as Prometheus text) on
//	                     http://HOST:PORT/metrics (default: none)
//	-store-profile NAME  object-store latency to inject: none (default), s3-standard,
//	                     s3-express (faultbucket; for benchmarks)
//	-max-connections N   connections open at once; past it a new one is closed at once
//	                     (Kafka's max.connections; default 0: 3/4 of RLIMIT_NOFILE)
//	-max-connections-per-ip N
//	                     the same per client IP address (max.connections.per.ip; default
//	                     0: no bound)
//	-idle-timeout D      close a connection that sent nothing this long while none of its
//	                     requests is under way (connections.max.idle.ms; default 10m)
//	-frame-timeout D     close a connection whose request frame is not whole this long
//	                     after its size arrived (default 30s)
//	-queued-max-request-bytes N
//	                     bytes of requests read and not answered, over every connection,
//	                     past which no connection reads another frame
//	                     (queued.max.request.bytes; default 100 MiB)
//	-compact-interval D  how often compacted topics' partitions are compacted
//	                     (log.cleaner.backoff.ms; default 15s; negative never)
//	-transactional-id-expiration D
//	                     remove a transactional ID whose last transaction ended this
//	                     long ago (transactional.id.expiration.ms; default 168h)
//
// Security flags (README.md's "Security" section shows a SASL_SSL setup):
//
//	-tls-cert FILE -tls-key FILE
//	                     serve TLS on -addr with this PEM certificate and key
//	-tls-client-ca FILE  require client certificates signed by these PEM CAs; without SASL
//	                     a client's principal is User: and its certificate's subject
//	-sasl-mechanisms LIST
//	                     require SASL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
//	                     (comma-separated; over TLS that is SASL_SSL, else SASL_PLAINTEXT)
//	-scram-bootstrap 'SCRAM-SHA-512=[name=admin,password=admin-secret]'
//	                     create this SCRAM credential at start if it is absent (Kafka's
//	                     kafka-storage format --add-scram syntax; repeatable)
//	-oauthbearer-unsecured-jwt
//	                     accept unsecured JWTs for OAUTHBEARER (for tests only)
//	-connections-max-reauth D
//	                     a SASL session lasts this long; the client then authenticates
//	                     again on its connection (KIP-368; default 0: no limit)
//	-authorizer acl      check every request against Kafka's ACLs (default: none, all allowed)
//	-super-users 'User:admin;User:ops'
//	                     principals allowed everything (Kafka's super.users)
//	-allow-everyone-if-no-acl-found
//	                     allow actions on resources no ACL names (default false)
//
// Once it accepts connections it prints one line to stdout, "listening on
// ADDR", with the address it listens on (so that a script that started it
// with -addr 127.0.0.1:0 learns the port). SIGINT or SIGTERM shut it down
// gracefully: it stops accepting, answers the requests it holds, and closes
// the Broker, which commits everything buffered.
//
// # What it serves
//
// Everything the package kafkaserver serves (its documentation lists the
// APIs, the consumer groups, the cluster and the limits): this command is
// a thin main over it, flags, logging and signals, which opens the
// diskless Broker the flags describe and serves a kafkaserver.Server on
// -addr. README.md explains every limit and shows a cluster of three
// nodes on one machine.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"gocloud.dev/blob"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/cluster/etcdcluster"
	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/faultbucket"
	"github.com/diskless-go/diskless/kafkaserver"
	_ "github.com/diskless-go/diskless/s3fast" // s3://, with the fast path of uploads (file:// and mem:// come with the facade)
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "kafka-broker:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	addr, advertised string
	data, bucket     string
	nodeID           int
	linger           time.Duration
	objectsPerSecond float64
	commit           string
	metadataLog      string
	autoCreate       bool
	offsetsMirror    bool
	partitions       int
	initialDelay     time.Duration
	logLevel         string
	storeProfile     string
	maxConns         int
	maxConnsPerIP    int
	perIPOverrides   map[string]int
	idleTimeout      time.Duration
	frameTimeout     time.Duration
	queuedBytes      int64
	compactInterval  time.Duration
	txnIDExpiration  time.Duration
	etcd             string
	peerAddr         string
	peerVersions     map[string]int
	features         map[string]int
	rack             string
	leaseTTL         time.Duration
	etcdSec          etcdSecurity
	metricsAddr      string
	sec              securityOptions

	// consumerHeartbeat and consumerSession are the heartbeat interval
	// and session timeout of KIP-848 consumer groups.
	consumerHeartbeat, consumerSession time.Duration
}

func parse(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("kafka-broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.addr, "addr", "127.0.0.1:9092", "`HOST:PORT` to listen on; port 0 picks a free one")
	fs.StringVar(&o.advertised, "advertise", "", "`HOST:PORT` clients are told to connect to: Metadata's address of this node (default: the listener's address)")
	fs.StringVar(&o.advertised, "advertised-addr", "", "the same as -advertise")
	fs.StringVar(&o.etcd, "etcd", "", "comma-separated etcd `ENDPOINTS` (host:port): run as one node of a cluster on one bucket (default: a single node)")
	fs.StringVar(&o.peerAddr, "peer-addr", "", "`HOST:PORT` where this node listens for the calls other nodes forward (with -etcd; default 127.0.0.1:0)")
	fs.Func("peer-versions", "with -etcd, the highest `METHOD=VERSION` of the calls between nodes this node speaks, comma-separated (commit=1): a staged upgrade", func(v string) (err error) {
		o.peerVersions, err = parseLevels(v, coordinator.CheckPeerVersions)
		return err
	})
	fs.Func("features", "with -etcd, the highest `NAME=LEVEL` of the cluster's features this node supports, comma-separated (diskless.version=1): a test of an upgrade", func(v string) (err error) {
		o.features, err = parseLevels(v, coordinator.CheckFeatures)
		return err
	})
	fs.StringVar(&o.rack, "rack", "", "this node's rack (availability zone) `NAME`: Metadata's rack, and where clients of that rack are sent")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", 0, "with -etcd, how long after a node stops renewing its etcd lease the others stop naming it (default 5s; whole seconds)")
	o.etcdSec.addFlags(fs)
	fs.StringVar(&o.data, "data", "", "local data `DIR`: caches and the coordinator database (default: a temporary folder removed on exit)")
	fs.StringVar(&o.bucket, "bucket", "", "bucket `URL` (default: file://DIR/bucket, a folder inside the data folder)")
	fs.IntVar(&o.nodeID, "node-id", 0, "the broker's node `ID`")
	fs.DurationVar(&o.linger, "linger", 250*time.Millisecond, "how long a WAL object waits for more produce requests before it is uploaded")
	fs.Float64Var(&o.objectsPerSecond, "objects-per-second", 0, "the PUT budget of WAL objects that are not full (0: one a linger); an object closes as soon as the budget allows")
	fs.StringVar(&o.metadataLog, "metadata-log", "bucket", "where the coordinator's metadata log lives: bucket or file")
	fs.StringVar(&o.commit, "commit", "auto", "how a WAL object is committed: auto (its PUT and the log entry at once with the bucket log on a single node, else one after the other), series or parallel (docs/parallel-commit.md)")
	fs.BoolVar(&o.autoCreate, "auto-create-topics", true, "create unknown topics on Metadata requests that allow it")
	fs.BoolVar(&o.offsetsMirror, "offsets-topic-mirror", false, "write every offset commit to __consumer_offsets in Kafka's format too, for tools that read that topic (Burrow)")
	fs.IntVar(&o.partitions, "partitions", 1, "partitions of auto-created topics, and of CreateTopics asking for -1")
	fs.DurationVar(&o.initialDelay, "group-initial-rebalance-delay", 3*time.Second, "how long the first rebalance of an empty group waits for more members (Kafka's group.initial.rebalance.delay.ms)")
	fs.DurationVar(&o.consumerHeartbeat, "consumer-group-heartbeat-interval", 5*time.Second, "the heartbeat interval the coordinator tells members of KIP-848 consumer groups (Kafka's group.consumer.heartbeat.interval.ms)")
	fs.DurationVar(&o.consumerSession, "consumer-group-session-timeout", 45*time.Second, "how long a member of a KIP-848 consumer group may go without a heartbeat before it is removed (Kafka's group.consumer.session.timeout.ms)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "`HOST:PORT` to serve the Broker's metrics on, as Prometheus text at /metrics (default: none)")
	fs.StringVar(&o.storeProfile, "store-profile", "none", "object-store latency to inject, for benchmarks: "+strings.Join(faultbucket.ProfileNames(), ", "))
	fs.IntVar(&o.maxConns, "max-connections", 0, "connections open at once, past which new ones are closed (Kafka's max.connections; 0: 3/4 of RLIMIT_NOFILE, negative: no bound)")
	fs.IntVar(&o.maxConnsPerIP, "max-connections-per-ip", 0, "connections open at once from one IP address (Kafka's max.connections.per.ip; 0: no bound)")
	fs.Func("max-connections-per-ip-overrides", "`HOST:N,...`: -max-connections-per-ip for these IP addresses or host names instead, 0 refusing every connection (Kafka's max.connections.per.ip.overrides)", func(v string) (err error) {
		o.perIPOverrides, err = parseConnOverrides(v)
		return err
	})
	fs.DurationVar(&o.idleTimeout, "idle-timeout", 10*time.Minute, "close a connection that sent nothing this long with no request under way (Kafka's connections.max.idle.ms)")
	fs.DurationVar(&o.frameTimeout, "frame-timeout", 30*time.Second, "close a connection whose request frame does not arrive whole this long after its size")
	fs.DurationVar(&o.compactInterval, "compact-interval", 15*time.Second, "how often the partitions of compacted topics are compacted (Kafka's log.cleaner.backoff.ms); negative: never")
	fs.DurationVar(&o.txnIDExpiration, "transactional-id-expiration", 7*24*time.Hour, "remove a transactional ID whose last transaction ended this long ago (Kafka's transactional.id.expiration.ms); negative: never")
	fs.Int64Var(&o.queuedBytes, "queued-max-request-bytes", 100<<20, "bytes of requests read and not yet answered, over every connection, past which no connection is read (Kafka's queued.max.request.bytes)")
	o.sec.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := o.sec.check(); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.nodeID < 0 || o.nodeID > 1<<31-1:
		return o, fmt.Errorf("-node-id %d is out of range", o.nodeID)
	case o.partitions < 1:
		return o, fmt.Errorf("-partitions %d must be at least 1", o.partitions)
	case o.initialDelay < 0:
		return o, fmt.Errorf("-group-initial-rebalance-delay %v is negative", o.initialDelay)
	case o.consumerHeartbeat <= 0 || o.consumerSession <= o.consumerHeartbeat:
		return o, fmt.Errorf("-consumer-group-heartbeat-interval %v must be positive and less than -consumer-group-session-timeout %v", o.consumerHeartbeat, o.consumerSession)
	case o.linger <= 0:
		return o, fmt.Errorf("-linger %v must be positive", o.linger)
	case o.objectsPerSecond != 0 && o.objectsPerSecond < float64(time.Second)/float64(o.linger):
		return o, fmt.Errorf("-objects-per-second %v must be 0 or at least one a linger (%v)", o.objectsPerSecond, float64(time.Second)/float64(o.linger))
	case o.idleTimeout <= 0 || o.frameTimeout <= 0:
		return o, fmt.Errorf("-idle-timeout and -frame-timeout must be positive")
	case o.queuedBytes <= 0:
		return o, fmt.Errorf("-queued-max-request-bytes %d must be positive", o.queuedBytes)
	case o.maxConnsPerIP < 0:
		return o, fmt.Errorf("-max-connections-per-ip %d is negative", o.maxConnsPerIP)
	case o.metricsAddr != "" && !validHostPort(o.metricsAddr):
		return o, fmt.Errorf("-metrics-addr %q is not HOST:PORT", o.metricsAddr)
	case o.metadataLog != "bucket" && o.metadataLog != "file":
		return o, fmt.Errorf("-metadata-log %q is neither bucket nor file", o.metadataLog)
	case o.commit != "auto" && o.commit != "series" && o.commit != "parallel":
		return o, fmt.Errorf("-commit %q is not auto, series or parallel", o.commit)
	case o.commit == "parallel" && o.etcd != "":
		return o, fmt.Errorf("-commit parallel is a single node's: with -etcd objects are committed in series")
	case o.etcd == "" && o.features != nil:
		return o, fmt.Errorf("-features needs -etcd: a single node finalizes what it supports")
	case o.etcd == "" && o.peerVersions != nil:
		return o, fmt.Errorf("-peer-versions needs -etcd: a single node calls no other")
	case o.etcd == "" && o.peerAddr != "":
		return o, fmt.Errorf("-peer-addr needs -etcd: a single node forwards nothing")
	case o.etcd == "" && o.leaseTTL != 0:
		return o, fmt.Errorf("-lease-ttl needs -etcd")
	case o.etcd == "" && o.sec.peerTLSFlags() > 0:
		return o, fmt.Errorf("-peer-tls-cert, -peer-tls-key and -peer-tls-ca need -etcd: a single node calls no other")
	case o.leaseTTL < 0 || o.leaseTTL > 0 && o.leaseTTL < time.Second:
		return o, fmt.Errorf("-lease-ttl %v must be at least 1s (etcd leases count whole seconds)", o.leaseTTL)
	case o.etcd != "" && o.metadataLog == "file":
		return o, fmt.Errorf("-metadata-log file is a single node's: with -etcd the metadata log is in etcd")
	}
	if o.etcd != "" {
		for _, e := range strings.Split(o.etcd, ",") {
			if _, err := hostOf(strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(e), "http://"), "https://")); err != nil {
				return o, fmt.Errorf("-etcd endpoint %q: %w", e, err)
			}
		}
		if o.peerAddr != "" {
			if _, err := hostOf(o.peerAddr); err != nil {
				return o, fmt.Errorf("-peer-addr: %w", err)
			}
		}
		if o.bucket == "" || strings.HasPrefix(o.bucket, "mem://") {
			return o, fmt.Errorf("-etcd needs a -bucket that every node shares (an s3:// URL; not mem://, nor the default folder in -data)")
		}
	}
	if err := o.etcdSec.check(o.etcd); err != nil {
		return o, err
	}
	if _, err := faultbucket.NamedProfile(o.storeProfile); err != nil {
		return o, fmt.Errorf("-store-profile: %w", err)
	}
	return o, nil
}

// parseConnOverrides parses HOST:N,HOST:N as Kafka's
// max.connections.per.ip.overrides: each host (an IPv6 address too,
// bracketed or not) before its last colon.
func parseConnOverrides(v string) (map[string]int, error) {
	out := map[string]int{}
	for _, kv := range strings.Split(v, ",") {
		i := strings.LastIndexByte(kv, ':')
		if i <= 0 {
			return nil, fmt.Errorf("%q is not HOST:N", kv)
		}
		n, err := strconv.Atoi(kv[i+1:])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: the bound must be a number, 0 or more", kv)
		}
		out[strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(kv[:i]), "["), "]")] = n
	}
	return out, nil
}

// newLogger logs to w at the named level.
func newLogger(level string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(w), lvl)
	return zap.New(core), nil
}

// run opens the broker, serves until ctx ends, and shuts down.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(o.logLevel, stderr)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // stderr

	data := o.data
	if data == "" {
		tmp, err := os.MkdirTemp("", "kafka-broker-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		data = tmp
	}
	if data, err = filepath.Abs(data); err != nil {
		return err
	}
	bucket := o.bucket
	if bucket == "" {
		bucket = "file://" + filepath.ToSlash(filepath.Join(data, "bucket")) // Open creates the folder
	}
	cfg := &diskless.Config{
		BucketURL: bucket,
		DataDir:   data,
		BrokerID:  int32(o.nodeID),
		Linger:    o.linger,
		Logger:    log,

		ObjectsPerSecond: o.objectsPerSecond,
		Commit:           commitModes[o.commit],

		CompactInterval:           o.compactInterval,
		TransactionalIDExpiration: o.txnIDExpiration,
	}
	if o.metadataLog == "file" {
		cfg.MetadataLog = diskless.MetadataInFile
	}
	cfg.Rack = o.rack
	if o.storeProfile != "none" {
		// The bucket behind the latency of a real object store: every
		// call waits as the profile says (the bench's S2 store profile is
		// s3-standard).
		prof, _ := faultbucket.NamedProfile(o.storeProfile)
		u := bucket
		if strings.HasPrefix(u, "file://") && !strings.Contains(u, "create_dir") {
			u += map[bool]string{true: "&", false: "?"}[strings.Contains(u, "?")] + "create_dir=1"
		}
		inner, err := blob.OpenBucket(ctx, u)
		if err != nil {
			return err
		}
		defer inner.Close()
		if cfg.Bucket, _, err = faultbucket.Wrap(inner, &faultbucket.Options{Profile: prof, Seed: uint64(time.Now().UnixNano())}); err != nil {
			return err
		}
		defer cfg.Bucket.Close()
	}

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	advertised := o.advertised
	if advertised == "" {
		advertised = ln.Addr().String()
	}
	host, err := hostOf(advertised)
	if err != nil {
		return fmt.Errorf("-advertise: %w", err)
	}
	if ip := net.ParseIP(host); o.etcd != "" && ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("-advertise %s: other nodes name this one to clients by it; give an address they can reach", advertised)
	}
	if o.etcd != "" {
		var eps []string
		for _, e := range strings.Split(o.etcd, ",") {
			eps = append(eps, strings.TrimSpace(e))
		}
		cfg.Cluster = &diskless.ClusterConfig{Backend: &etcdcluster.Backend{Endpoints: eps}, PeerAddr: o.peerAddr, Advertise: advertised, LeaseTTL: o.leaseTTL,
			PeerVersions: o.peerVersions, Features: o.features}
	}
	if err := o.etcdSec.apply(cfg.Cluster, log); err != nil {
		return err
	}

	if o.metricsAddr != "" {
		mp, stop, err := serveMetrics(o.metricsAddr, log)
		if err != nil {
			return err
		}
		defer stop()
		cfg.MeterProvider = mp
	}

	tlsConfig, err := o.sec.tlsConfig()
	if err != nil {
		return err
	}
	if cfg.Cluster != nil {
		if cfg.Cluster.PeerTLS, err = o.sec.peerTLS(); err != nil {
			return err
		}
	}
	o.sec.warn(log)
	b, err := diskless.Open(ctx, cfg)
	if err != nil {
		return err
	}
	if err := o.sec.bootstrapUsers(ctx, b, log); err != nil {
		return errors.Join(err, b.Close())
	}
	delay := o.initialDelay
	if delay == 0 {
		delay = -1 // none: Config's 0 is Kafka's 3 s
	}
	srv, err := kafkaserver.New(ctx, b, &kafkaserver.Config{
		Advertise:                      advertised,
		NodeID:                         int32(o.nodeID),
		Rack:                           o.rack,
		Clustered:                      o.etcd != "",
		DisableAutoCreateTopics:        !o.autoCreate,
		DefaultPartitions:              int32(o.partitions),
		GroupInitialRebalanceDelay:     delay,
		OffsetsTopicMirror:             o.offsetsMirror,
		ConsumerGroupHeartbeatInterval: o.consumerHeartbeat,
		ConsumerGroupSessionTimeout:    o.consumerSession,
		LogDir:                         bucket,
		Logger:                         log,
		MaxConnections:                 o.maxConns,
		MaxConnectionsPerIP:            o.maxConnsPerIP,
		MaxConnectionsPerIPOverrides:   o.perIPOverrides,
		IdleTimeout:                    o.idleTimeout,
		FrameTimeout:                   o.frameTimeout,
		QueuedMaxRequestBytes:          o.queuedBytes,
		TLS:                            tlsConfig,
		SASL:                           o.sec.saslConfig(),
		ACL:                            o.sec.aclConfig(),
		MeterProvider:                  cfg.MeterProvider,
	})
	if err != nil {
		return errors.Join(err, b.Close())
	}
	log.Info("kafka-broker started", zap.String("addr", ln.Addr().String()), zap.String("advertised", advertised),
		zap.String("bucket", bucket), zap.String("data", data), zap.Int("node", o.nodeID), zap.String("etcd", o.etcd), zap.String("rack", o.rack))
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		log.Info("kafka-broker shutting down")
		err = srv.Close()
		if serr := <-served; serr != nil {
			err = errors.Join(err, serr)
		}
	case err = <-served:
		log.Error("kafka-broker stopped serving", zap.Error(err))
		err = errors.Join(err, srv.Close())
	}
	err = errors.Join(err, b.Close())
	log.Info("kafka-broker stopped", zap.Error(err))
	return err
}

// validHostPort reports whether addr is HOST:PORT with a numeric port.
func validHostPort(addr string) bool {
	_, err := hostOf(addr)
	return err == nil
}

// serveMetrics serves what the returned MeterProvider's instruments
// measure as Prometheus text on http://addr/metrics, through the
// OpenTelemetry Prometheus exporter, until stop.
func serveMetrics(addr string, log *zap.Logger) (mp *sdkmetric.MeterProvider, stop func(), err error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, nil, fmt.Errorf("-metrics-addr: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("-metrics-addr: %w", err)
	}
	mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("serving metrics", zap.Error(err))
		}
	}()
	log.Info("metrics served", zap.String("url", "http://"+ln.Addr().String()+"/metrics"))
	return mp, func() {
		srv.Close()
		<-done
		mp.Shutdown(context.Background()) //nolint:errcheck // nothing to flush: a pull exporter
	}, nil
}

// hostOf checks that addr is HOST:PORT with a numeric port, and returns
// HOST.
func hostOf(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("port %q: %w", port, err)
	}
	return host, nil
}

// parseLevels parses -peer-versions and -features: NAME=N pairs, comma
// separated, that check accepts.
func parseLevels(v string, check func(map[string]int) error) (map[string]int, error) {
	m := map[string]int{}
	for _, pair := range strings.Split(v, ",") {
		name, n, ok := strings.Cut(strings.TrimSpace(pair), "=")
		level, err := strconv.Atoi(n)
		if !ok || err != nil {
			return nil, fmt.Errorf("%q is not NAME=N", pair)
		}
		m[name] = level
	}
	if err := check(m); err != nil {
		return nil, err
	}
	return m, nil
}

// commitModes are -commit's values.
var commitModes = map[string]diskless.CommitMode{"auto": diskless.CommitAuto, "series": diskless.CommitInSeries, "parallel": diskless.CommitInParallel}
