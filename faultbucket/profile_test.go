package faultbucket

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProfileFuncs: S3Standard and S3Express are the named profiles;
// WithErrorRate sets the rate of the ops named, or of every op, on a copy.
func TestProfileFuncs(t *testing.T) {
	for name, f := range map[string]func() Profile{"s3-standard": S3Standard, "s3-express": S3Express} {
		named, err := NamedProfile(name)
		require.NoError(t, err)
		p := f()
		require.Equal(t, name, p.Name)
		for op := range NumOps {
			require.Equal(t, named.Ops[op].Latency.Quantile(0.99), p.Ops[op].Latency.Quantile(0.99), "%s %v", name, op)
		}
	}
	base := S3Standard()
	p := base.WithErrorRate(0.02)
	for op := range NumOps {
		require.Equal(t, 0.02, p.Ops[op].ErrorRate)
		require.Zero(t, base.Ops[op].ErrorRate, "a copy")
	}
	p = Profile{}.WithErrorRate(0.1, Put, Get)
	require.Equal(t, 0.1, p.Ops[Put].ErrorRate)
	require.Equal(t, 0.1, p.Ops[Get].ErrorRate)
	require.Zero(t, p.Ops[Delete].ErrorRate)
	require.Error(t, Profile{}.WithErrorRate(2).Validate())
}
