package coordinator

import (
	"context"

	"github.com/diskless-go/diskless/coordinator/state"
	"github.com/diskless-go/diskless/quota"
)

// Client quotas (Kafka's AlterClientQuotas and DescribeClientQuotas,
// KIP-546): each entity's values of the quota keys. Like the SCRAM
// credentials and ACLs (security.go) they live in shard 0 as records
// (state.QuotaSetRecord, state.QuotaRemoveRecord) that every replica
// applies to its view and to the table client_quotas; changes go to
// shard 0's leader, and reads are the security state's (from this
// broker's follower of shard 0 in a cluster, at once after a change this
// broker made). Their Version counts the quota records applied, apart
// from the security Version, so that a poller of either is not woken by
// the other's changes.

// ClientQuotasLevel is the level of FeatureDisklessVersion that brings
// the client quota records (see features.go): the facade refuses
// AlterClientQuotas while the cluster's finalized level is below it.
const ClientQuotasLevel = 2

// AlterClientQuotas applies the entries' changes in shard 0 (forwarded
// to its leader in a cluster), or with validateOnly only decides them.
// It returns one error per entry, nil for those applied (or that would
// be), as Kafka's AlterClientQuotas answers each entity: INVALID_REQUEST
// for an entity in two entries (both), a key changed twice in one, an
// entity or a value that is not valid (quota.Alteration.Validate). An
// entry with an error changes nothing; the others are applied. The
// error return is for the call as a whole.
func (c *Coordinator) AlterClientQuotas(ctx context.Context, entries []quota.Alteration, validateOnly bool) ([]error, error) {
	sh, err := c.securityLeader()
	if err != nil {
		return nil, err
	}
	if sh == nil {
		a, err := remoteCall[itemErrors](ctx, c.remotes[0], fwAdminQuotas, quotasCall{Entries: entries, ValidateOnly: validateOnly})
		if err != nil {
			return nil, err
		}
		c.ackSecurity(a.Applied)
		return a.errors(), nil
	}
	return sh.AlterClientQuotas(ctx, entries, validateOnly)
}

// DescribeClientQuotas returns the quotas of the entities filter
// matches (see quota.Filter), ordered by quota.CompareEntities, read as
// ClientQuotas reads. A filter that is not valid returns the error Kafka
// answers (quota.Filter.Validate).
func (c *Coordinator) DescribeClientQuotas(ctx context.Context, filter quota.Filter) ([]quota.Quota, error) {
	if err := filter.Validate(); err != nil {
		return nil, err
	}
	st, err := c.ClientQuotas(ctx, -1)
	if err != nil {
		return nil, err
	}
	var out []quota.Quota
	for _, q := range st.Quotas {
		if filter.Matches(q.Entity) {
			out = append(out, q)
		}
	}
	return out, nil
}

// ClientQuotas returns every entity's quotas with their Version; when
// since is that Version, only the Version (Changed false): a cheap call
// to poll. since -1 always gets the list. It reads as Security does: a
// change made on any broker is seen as soon as this broker's follower of
// shard 0 applied it, and one this broker made, at once.
func (c *Coordinator) ClientQuotas(ctx context.Context, since int64) (ClientQuotasState, error) {
	pub, err := c.catalogPub(ctx)
	if err != nil {
		return ClientQuotasState{}, err
	}
	if pub == nil {
		st, err := remoteCall[ClientQuotasState](ctx, c.remotes[0], fwClientQuotas, since)
		if st.Changed && st.Quotas == nil { // gob sends an empty list as none
			st.Quotas = []quota.Quota{}
		}
		return st, err
	}
	return pub.Quotas.Load().State(since), nil
}

// AlterClientQuotas decides and applies the entries in this shard (see
// Coordinator.AlterClientQuotas).
func (l *leader) AlterClientQuotas(ctx context.Context, entries []quota.Alteration, validateOnly bool) ([]error, error) {
	o := &state.ClientQuotasOp{BaseOp: state.NewBaseOp(ctx), Entries: entries, ValidateOnly: validateOnly}
	if err := l.submit(ctx, o, o.Done); err != nil {
		return nil, err
	}
	return o.Errs, nil
}

// quotasCall is the request of a forwarded AlterClientQuotas.
type quotasCall struct {
	Entries      []quota.Alteration
	ValidateOnly bool
}

// The forwarded quota calls, served on shard 0's leader (see
// serveFuncs).
var (
	serveAlterQuotas = served(func(ctx context.Context, _ *Coordinator, c *leader, req quotasCall) (itemErrors, error) {
		errs, err := c.AlterClientQuotas(ctx, req.Entries, req.ValidateOnly)
		return toItemErrors(errs, c.applied.Load()), err
	})
	serveClientQuotas = served(func(_ context.Context, _ *Coordinator, c *leader, since int64) (ClientQuotasState, error) {
		return c.pub.Quotas.Load().State(since), nil
	})
)
