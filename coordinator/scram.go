package coordinator

import (
	"context"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/diskless-go/diskless/scram"
)

// SCRAM credentials (Kafka's AlterUserScramCredentials): a user's salt,
// iteration count, StoredKey and ServerKey for one mechanism, never a
// password. They live in shard 0, the cluster-wide catalog, as records
// (scramUpsertRecord, scramDeleteRecord) that every replica of shard 0
// applies to its view and to the table scram_credentials; the Kafka
// server reads them (Coordinator.Security, Coordinator.ScramCredential)
// to authenticate SASL/SCRAM and SASL/PLAIN connections.

// AlterScramCredentials upserts and deletes SCRAM credentials of this
// shard (see Coordinator.AlterScramCredentials).
func (l *leader) AlterScramCredentials(ctx context.Context, upserts []scram.Credential, deletions []ScramDeletion) ([]error, error) {
	o := &state.ScramOp{BaseOp: state.NewBaseOp(ctx), Upserts: upserts, Deletions: deletions}
	if err := l.submit(ctx, o, o.Done); err != nil {
		return nil, err
	}
	return o.Errs, nil
}
