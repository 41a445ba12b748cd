package metalog_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/gcerrors"

	"github.com/diskless-go/diskless/coordinator/metalog"
	"github.com/diskless-go/diskless/coordinator/metalog/metalogtest"
	"github.com/diskless-go/diskless/internal/testbucket"
)

// errInjected is the failure the harnesses inject.
const errInjected = "injected failure"

// TestConformance runs the suite against every implementation: Mem (with
// and without latency), File, and Bucket over memory, a folder and a real
// S3 server. (etcdlog's TestEtcdConformance runs it against the etcd Log.)
func TestConformance(t *testing.T) {
	memHarness := func(opts *metalog.MemOptions) func(t *testing.T) metalogtest.Harness {
		return func(t *testing.T) metalogtest.Harness {
			root := metalog.NewMem(opts)
			t.Cleanup(func() { root.Close() })
			return metalogtest.Harness{
				Open:   func(t *testing.T) metalog.Log { return root.Writer() },
				Shared: true,
				Fail:   func(t *testing.T, l metalog.Log) { l.(*metalog.Mem).FailNext(errorString(errInjected)) },
			}
		}
	}
	t.Run("log=mem", func(t *testing.T) {
		t.Parallel()
		metalogtest.Run(t, memHarness(nil))
	})
	t.Run("log=mem-latency", func(t *testing.T) {
		t.Parallel()
		metalogtest.Run(t, memHarness(&metalog.MemOptions{Latency: 50 * time.Microsecond, MaxInFlight: 8}))
	})
	t.Run("log=file", func(t *testing.T) {
		t.Parallel()
		metalogtest.Run(t, func(t *testing.T) metalogtest.Harness {
			dir := t.TempDir()
			return metalogtest.Harness{
				Open: func(t *testing.T) metalog.Log {
					l, err := metalog.OpenFile(dir, &metalog.FileOptions{SegmentBytes: 4 << 10, MaxInFlight: 32})
					require.NoError(t, err)
					return l
				},
				Fail:            func(t *testing.T, l metalog.Log) { metalog.FailNextFileWrite(l.(*metalog.File)) },
				FailNeedsReopen: true,
			}
		})
	})
	for _, kind := range testbucket.Kinds {
		t.Run("log=bucket-"+kind, func(t *testing.T) {
			t.Parallel()
			metalogtest.Run(t, func(t *testing.T) metalogtest.Harness {
				b, faults := testbucket.Wrap(t, testbucket.New(t, kind))
				h := metalogtest.Harness{
					Open: func(t *testing.T) metalog.Log {
						l, err := metalog.OpenBucket(t.Context(), b, "meta/0/", &metalog.BucketOptions{
							RetryBackoff: time.Millisecond, MaxAttempts: 3, TrimGrace: -1, PollInterval: 5 * time.Millisecond,
						})
						require.NoError(t, err)
						return l
					},
					Shared: true,
					Fail: func(t *testing.T, l metalog.Log) {
						var once sync.Once
						faults.Set(func(op, key string) testbucket.Fault {
							var f testbucket.Fault
							if op == "put" {
								once.Do(func() { f.Err = &testbucket.Error{Code: gcerrors.PermissionDenied, Msg: errInjected} })
							}
							return f
						})
					},
				}
				if kind == "file" {
					h.NotAtomic = "fileblob's IfNotExist (gocloud v0.47) is a stat then a rename, not atomic: two puts of one key at the same moment may both succeed"
				}
				return h
			})
		})
	}
}

// errorString is an error with a fixed text.
type errorString string

func (e errorString) Error() string { return string(e) }
