package diskless

import (
	"context"

	"github.com/diskless-go/diskless/coordinator"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/quota"
)

// Client quotas: each entity's values of Kafka's quota keys (see package
// quota), kept by the coordinator as records of shard 0 like the
// security state (see package coordinator's quotas.go): a change made on
// any broker is seen by every broker of the cluster within a second,
// survives restarts, and is carried by snapshots. The Kafka front end
// maps AlterClientQuotas and DescribeClientQuotas to the methods of the
// same names; its enforcement reads them with ClientQuotas, polled with
// the Version it has.
//
// The quota records are new in level 2 of the feature diskless.version
// (coordinator.ClientQuotasLevel): a broker of an older release cannot
// read them, so AlterClientQuotas is refused until the cluster's
// finalized level is 2 (see Broker.Features, UpdateFeatures). Until
// then there are none, and the reads answer so without asking shard 0's
// leader, which may run a release without the calls that read them.

// ClientQuotasState is every entity's client quotas, with a Version that
// grows with every change (see Broker.ClientQuotas).
type ClientQuotasState = coordinator.ClientQuotasState

// AlterClientQuotas applies the entries' changes (sets and removals of
// an entity's values), or with validateOnly only decides them. It
// returns one error per entry, nil for those applied (or that would be),
// as Kafka's AlterClientQuotas answers each entity: INVALID_REQUEST for
// an entity in two entries, a key changed twice in one, an entity or a
// value that is not valid (quota.Alteration.Validate). An entry with an
// error changes nothing; the others are applied. The error return is
// for the call as a whole: UNSUPPORTED_VERSION while the cluster's
// diskless.version is below coordinator.ClientQuotasLevel (validateOnly
// too, so that it answers what the change would).
func (b *Broker) AlterClientQuotas(ctx context.Context, entries []quota.Alteration, validateOnly bool) ([]error, error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	if level := b.quotaLevel(); level < coordinator.ClientQuotasLevel {
		return nil, kafkaerr.New(kafkaerr.UnsupportedVersion, "client quotas need the cluster's feature %s at level %d, and it is finalized at %d: raise it with UpdateFeatures once every broker supports it",
			coordinator.FeatureDisklessVersion, coordinator.ClientQuotasLevel, level)
	}
	errs, err := b.coord.AlterClientQuotas(ctx, entries, validateOnly)
	return errs, b.closedErr(err)
}

// DescribeClientQuotas returns the quotas of the entities filter matches
// (Kafka's DescribeClientQuotas: see quota.Filter), ordered by
// quota.CompareEntities. A filter that is not valid returns the error
// Kafka answers (INVALID_REQUEST, or UNSUPPORTED_VERSION for an unknown
// entity type). The caller owns the result.
func (b *Broker) DescribeClientQuotas(ctx context.Context, filter quota.Filter) ([]quota.Quota, error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	if b.quotaLevel() < coordinator.ClientQuotasLevel {
		return nil, filter.Validate() // none yet
	}
	qs, err := b.coord.DescribeClientQuotas(ctx, filter)
	return qs, b.closedErr(err)
}

// ClientQuotas returns every entity's quotas with their Version; when
// since is that Version, only the Version (Changed false), so that
// polling it is cheap. since -1 always gets the list. The Version is the
// quotas' own: a change of the security state does not move it. While
// the cluster's diskless.version is below coordinator.ClientQuotasLevel
// it is 0, with no quotas. The caller owns the result.
func (b *Broker) ClientQuotas(ctx context.Context, since int64) (ClientQuotasState, error) {
	if b.closed.Load() {
		return ClientQuotasState{}, ErrClosed
	}
	if b.quotaLevel() < coordinator.ClientQuotasLevel {
		// None yet: version 0, as a cluster that never had any.
		if since == 0 {
			return ClientQuotasState{}, nil
		}
		return ClientQuotasState{Changed: true, Quotas: []quota.Quota{}}, nil
	}
	st, err := b.coord.ClientQuotas(ctx, since)
	return st, b.closedErr(err)
}

// quotaLevel is the cluster's finalized level of diskless.version, as
// this broker last saw it (0 while it is not known).
func (b *Broker) quotaLevel() int {
	return b.Features().Finalized[coordinator.FeatureDisklessVersion]
}
