// Package disklesstest starts diskless in a test, as net/http/httptest
// starts an HTTP server and franz-go's kfake a Kafka cluster: one call, a
// real Broker (and, with NewKafka, a real Kafka server on a loopback
// port), closed with the test.
//
//	func TestOrders(t *testing.T) {
//		k := disklesstest.NewKafka(t, &disklesstest.KafkaConfig{
//			Topics: []disklesstest.Topic{{Name: "orders", Partitions: 3}},
//		})
//		cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addr()))
//		...
//	}
//
// Everything lives in the test: a mem:// bucket (or the one
// KafkaConfig.Bucket gives: a faultbucket-wrapped bucket makes the store
// slow or failing), a data folder from tb.TempDir, a listener on
// 127.0.0.1 and a free port. Many run in one test binary, in parallel,
// sharing nothing. The defaults suit tests, not production: the Broker
// lingers 5 ms (not 250 ms) and a consumer group's first rebalance does
// not wait for more members (not 3 s). Each starts in 10 to 20 ms
// (BenchmarkNewBroker, BenchmarkNewKafka).
package disklesstest

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/memblob" // mem://

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/faultbucket"
	"github.com/diskless-go/diskless/kafkaserver"
	"github.com/diskless-go/diskless/scram"
)

// testLinger is the Linger of the Brokers this package opens, unless
// their Config says otherwise: a produce request is answered about this
// much after it arrives.
const testLinger = 5 * time.Millisecond

// NewBroker opens a diskless.Broker for the test, configured by cfg (nil
// means the defaults), and closes it when the test ends (tb.Cleanup); the
// test fails if Close returns an error (Close commits what is buffered:
// an error there means acknowledged records may be lost). Where cfg
// leaves them zero, the bucket is a new mem:// bucket of the Broker's
// own, the data folder is a new tb.TempDir, and Linger is 5 ms; every
// other field has diskless.Config's default. cfg is not modified. A
// failure to open fails the test at once (tb.Fatal).
func NewBroker(tb testing.TB, cfg *diskless.Config) *diskless.Broker {
	tb.Helper()
	var c diskless.Config
	if cfg != nil {
		c = *cfg
	}
	if c.Bucket == nil && c.BucketURL == "" {
		c.BucketURL = "mem://"
	}
	if c.DataDir == "" {
		c.DataDir = tb.TempDir()
	}
	if c.Linger == 0 {
		c.Linger = testLinger
	}
	b, err := diskless.Open(tb.Context(), &c)
	if err != nil {
		tb.Fatalf("disklesstest: opening the Broker: %v", err)
	}
	tb.Cleanup(func() {
		if err := b.Close(); err != nil {
			tb.Errorf("disklesstest: closing the Broker: %v", err)
		}
	})
	return b
}

// KafkaConfig configures NewKafka. A nil *KafkaConfig, and the zero value
// of each field, mean the defaults.
type KafkaConfig struct {
	// Bucket, if not nil, is the bucket the Broker stores in, in place
	// of Broker's Bucket and BucketURL: a faultbucket-wrapped mem://
	// bucket, say, for a store that fails or is slow. NewKafka does not
	// close it: close it in a tb.Cleanup registered before NewKafka (the
	// cleanups run last in, first out, so it then runs after the
	// Broker's Close), or not at all for a mem:// bucket, which holds
	// nothing but memory.
	Bucket *blob.Bucket
	// Faults, if not nil, makes the store a faultbucket-wrapped mem://
	// bucket (or Bucket, if set, wrapped) with these faults: a store like
	// S3 Standard whose calls fail 2% of the time is
	//
	//	Faults: &faultbucket.Options{Profile: faultbucket.S3Standard().WithErrorRate(0.02)}
	//
	// Kafka.Faults controls it while the test runs (outages, stalls, a
	// hook, its counts).
	Faults *faultbucket.Options
	// Broker configures the Broker, as NewBroker's cfg does; nil means
	// NewBroker's defaults.
	Broker *diskless.Config
	// Server configures the Kafka server; nil means kafkaserver's
	// defaults, with these changes where it leaves the fields zero:
	// NodeID, Rack and Clustered are the Broker's (Broker.BrokerID,
	// Broker.Rack, Broker.Cluster != nil), and GroupInitialRebalanceDelay
	// is none, not 3 s (set it to wait). It listens on 127.0.0.1 and a
	// free port, and advertises that address unless Server.Advertise
	// says otherwise.
	Server *kafkaserver.Config
	// Topics are created before NewKafka returns.
	Topics []Topic
	// Security, if not nil, turns on SASL and Kafka's ACLs, as kfake's
	// SASL and ACL options do: clients must authenticate, and may do
	// only what the ACLs allow. The super user "admin" is created with a
	// random password (Kafka.Admin); Server's SASL and ACL are replaced.
	Security *Security
}

// Security configures SASL and ACLs for NewKafka.
type Security struct {
	// Mechanisms are the SASL mechanisms clients may use; nil means
	// PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.
	Mechanisms []string
	// Users are created before NewKafka returns, user name to password,
	// each with a SCRAM-SHA-256 and a SCRAM-SHA-512 credential (PLAIN
	// checks the same).
	Users map[string]string
	// ACLs are created before NewKafka returns.
	ACLs []acl.Binding
	// AllowEveryoneIfNoACLFound allows actions on resources no ACL
	// names (Kafka's allow.everyone.if.no.acl.found; default false).
	AllowEveryoneIfNoACLFound bool
}

// Topic is a topic for NewKafka to create.
type Topic struct {
	// Name names the topic.
	Name string
	// Partitions is its partition count; 0 means 1.
	Partitions int32
}

// Kafka is a Kafka server over a diskless Broker, started by NewKafka,
// serving on 127.0.0.1 until the test ends. It is safe for concurrent
// use.
type Kafka struct {
	addr          string
	b             *diskless.Broker
	faults        *faultbucket.Faults
	adminPassword string
}

// NewKafka starts a Kafka server for the test (kafkaserver over a Broker
// that NewBroker opens), configured by cfg (nil means the defaults),
// creates cfg.Topics, and stops it when the test ends: the server is
// closed (it answers the requests it holds), then the Broker; the test
// fails if either reports an error. A failure to start fails the test at
// once (tb.Fatal).
func NewKafka(tb testing.TB, cfg *KafkaConfig) *Kafka {
	tb.Helper()
	var c KafkaConfig
	if cfg != nil {
		c = *cfg
	}
	var bc diskless.Config
	if c.Broker != nil {
		bc = *c.Broker
	}
	if c.Bucket != nil {
		bc.Bucket, bc.BucketURL = c.Bucket, ""
	}
	var faults *faultbucket.Faults
	if c.Faults != nil {
		inner := c.Bucket
		if inner == nil {
			inner = memBucket(tb)
		}
		var err error
		if bc.Bucket, faults, err = faultbucket.Wrap(inner, c.Faults); err != nil {
			tb.Fatalf("disklesstest: %v", err)
		}
		bc.BucketURL = ""
	}
	b := NewBroker(tb, &bc)

	var sc kafkaserver.Config
	if c.Server != nil {
		sc = *c.Server
	}
	if sc.NodeID == 0 && sc.Rack == "" && !sc.Clustered {
		sc.NodeID, sc.Rack, sc.Clustered = bc.BrokerID, bc.Rack, bc.Cluster != nil
	}
	if sc.GroupInitialRebalanceDelay == 0 {
		sc.GroupInitialRebalanceDelay = -1
	}
	var adminPassword string
	if sec := c.Security; sec != nil {
		adminPassword = rand.Text()
		users := map[string]string{AdminUser: adminPassword}
		for u, p := range sec.Users {
			if u == AdminUser {
				tb.Fatalf("disklesstest: Security.Users names %q, the super user NewKafka makes", AdminUser)
			}
			users[u] = p
		}
		if err := addUsers(tb, b, users); err != nil {
			tb.Fatalf("disklesstest: %v", err)
		}
		if len(sec.ACLs) > 0 {
			errs, err := b.CreateACLs(tb.Context(), sec.ACLs)
			if err == nil {
				err = errors.Join(errs...)
			}
			if err != nil {
				tb.Fatalf("disklesstest: creating the ACLs: %v", err)
			}
		}
		mechs := sec.Mechanisms
		if mechs == nil {
			mechs = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
		}
		sc.SASL = &kafkaserver.SASLConfig{Mechanisms: mechs}
		sc.ACL = &kafkaserver.ACLConfig{SuperUsers: []string{"User:" + AdminUser}, AllowEveryoneIfNoACLFound: sec.AllowEveryoneIfNoACLFound}
		sc.Authorizer = nil
	}
	srv, err := kafkaserver.New(tb.Context(), b, &sc)
	if err != nil {
		tb.Fatalf("disklesstest: starting the Kafka server: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("disklesstest: %v", errors.Join(err, srv.Close()))
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	tb.Cleanup(func() {
		if err := errors.Join(srv.Close(), <-served); err != nil {
			tb.Errorf("disklesstest: stopping the Kafka server: %v", err)
		}
	})
	for _, t := range c.Topics {
		if _, err := b.CreateTopic(tb.Context(), t.Name, diskless.TopicConfig{Partitions: max(t.Partitions, 1)}); err != nil {
			tb.Fatalf("disklesstest: creating topic %q: %v", t.Name, err)
		}
	}
	return &Kafka{addr: ln.Addr().String(), b: b, faults: faults, adminPassword: adminPassword}
}

// AdminUser is the super user NewKafka makes with KafkaConfig.Security.
const AdminUser = "admin"

// Admin returns the super user's name and password, with
// KafkaConfig.Security; "", "" without.
func (k *Kafka) Admin() (user, password string) {
	if k.adminPassword == "" {
		return "", ""
	}
	return AdminUser, k.adminPassword
}

// addUsers gives each user a SCRAM-SHA-256 and a SCRAM-SHA-512
// credential (one request each: Kafka refuses a user named twice in one).
func addUsers(tb testing.TB, b *diskless.Broker, users map[string]string) error {
	for _, m := range []scram.Mechanism{scram.SHA256, scram.SHA512} {
		var creds []scram.Credential
		for u, p := range users {
			c, err := scram.New(u, m, p, 0)
			if err != nil {
				return fmt.Errorf("user %q: %w", u, err)
			}
			creds = append(creds, c)
		}
		errs, err := b.AlterScramCredentials(tb.Context(), creds, nil)
		if err == nil {
			err = errors.Join(errs...)
		}
		if err != nil {
			return fmt.Errorf("creating the users: %w", err)
		}
	}
	return nil
}

// FaultBucket returns a mem:// bucket wrapped by faultbucket with opts,
// for NewBroker's Config.Bucket (NewKafka takes KafkaConfig.Faults), and
// the control of its faults. The bucket is closed when the test ends,
// after a Broker opened on it later in the test.
func FaultBucket(tb testing.TB, opts *faultbucket.Options) (*blob.Bucket, *faultbucket.Faults) {
	tb.Helper()
	b, f, err := faultbucket.Wrap(memBucket(tb), opts)
	if err != nil {
		tb.Fatalf("disklesstest: %v", err)
	}
	return b, f
}

// memBucket opens a mem:// bucket, closed when the test ends (after what
// is opened on it later, cleanups running last in, first out).
func memBucket(tb testing.TB) *blob.Bucket {
	tb.Helper()
	b, err := blob.OpenBucket(tb.Context(), "mem://")
	if err != nil {
		tb.Fatalf("disklesstest: opening a mem:// bucket: %v", err)
	}
	tb.Cleanup(func() { b.Close() })
	return b
}

// Faults returns the control of the store's faults when KafkaConfig.Faults
// was set, nil otherwise.
func (k *Kafka) Faults() *faultbucket.Faults { return k.faults }

// Addr returns the server's bootstrap address: 127.0.0.1 and its port,
// for kgo.SeedBrokers, sarama or any client.
func (k *Kafka) Addr() string { return k.addr }

// Broker returns the Broker under the server, to create topics, look at
// Stats, or produce and fetch without the Kafka protocol.
func (k *Kafka) Broker() *diskless.Broker { return k.b }
