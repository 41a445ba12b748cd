package kafkaserver

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/quota"
)

// The client quota admin APIs (DescribeClientQuotas, AlterClientQuotas,
// KIP-546): the quotas are kept by the Broker as coordinator records, so
// every node of a cluster sees them. Kafka asks DESCRIBE_CONFIGS and
// ALTER_CONFIGS on the cluster for them (authorizeRequest).

// describeClientQuotas answers DescribeClientQuotas: the entities the
// filter matches and their values; a filter Kafka refuses answers its
// error (INVALID_REQUEST; UNSUPPORTED_VERSION for an unknown entity
// type), with no entries.
func (s *Server) describeClientQuotas(ctx context.Context, req *kmsg.DescribeClientQuotasRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	f := quota.Filter{Strict: req.Strict}
	for _, c := range req.Components {
		fc := quota.FilterComponent{Type: c.EntityType, Match: quota.Match(c.MatchType)}
		if fc.Match == quota.MatchExact {
			if c.Match == nil {
				err := kafkaerr.New(kafkaerr.InvalidRequest, "an exact match of entity type %s needs a name", c.EntityType)
				resp.ErrorCode, resp.ErrorMessage = codeOf(err), messageOf(err)
				return resp
			}
			fc.Name = *c.Match
		}
		f.Components = append(f.Components, fc)
	}
	qs, err := s.b.DescribeClientQuotas(ctx, f)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = codeOf(err), messageOf(err)
		return resp
	}
	for _, q := range qs {
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		q.Entity.EachComponent(func(typ string, c quota.Component) {
			ec := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ec.Type, ec.Name = typ, componentName(c)
			e.Entity = append(e.Entity, ec)
		})
		keys := make([]string, 0, len(q.Values))
		for k := range q.Values {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q.Values[k]
			e.Values = append(e.Values, v)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return resp
}

// componentName is a component's name as the protocol sends it: nil for
// the default.
func componentName(c quota.Component) *string {
	if c.Default {
		return nil
	}
	return kmsg.StringPtr(c.Name)
}

// alterClientQuotas answers AlterClientQuotas: one result per entry,
// its entity as the request named it. An entry naming an unknown entity
// type, or a type twice, is INVALID_REQUEST; the others are decided by
// the Broker as Kafka's controller decides them (see
// diskless.Broker.AlterClientQuotas), applied unless validate_only.
func (s *Server) alterClientQuotas(ctx context.Context, req *kmsg.AlterClientQuotasRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	resp.Entries = make([]kmsg.AlterClientQuotasResponseEntry, len(req.Entries))
	var entries []quota.Alteration
	var at []int
	for i, re := range req.Entries {
		resp.Entries[i] = alterQuotasResult(re, nil)
		a, err := alterationOf(re)
		if err != nil {
			resp.Entries[i] = alterQuotasResult(re, err)
			continue
		}
		entries, at = append(entries, a), append(at, i)
	}
	if len(entries) == 0 {
		return resp
	}
	errs, err := s.b.AlterClientQuotas(ctx, entries, req.ValidateOnly)
	for j, i := range at {
		e := err
		if e == nil && j < len(errs) {
			e = errs[j]
		}
		if e != nil {
			resp.Entries[i] = alterQuotasResult(req.Entries[i], e)
		}
	}
	if err == nil && !req.ValidateOnly && s.quotas != nil {
		// This node enforces them at once; the others at their next read.
		if err := s.quotas.refresh(ctx); err != nil {
			s.log.Warn("reading the client quotas after AlterClientQuotas failed", zap.Error(err))
		}
	}
	return resp
}

// alterationOf returns the alteration an entry asks for.
func alterationOf(re kmsg.AlterClientQuotasRequestEntry) (quota.Alteration, error) {
	var a quota.Alteration
	for _, c := range re.Entity {
		if err := a.Entity.SetComponent(c.Type, c.Name); err != nil {
			return quota.Alteration{}, err
		}
	}
	for _, op := range re.Ops {
		a.Changes = append(a.Changes, quota.Change{Key: op.Key, Value: op.Value, Remove: op.Remove})
	}
	return a, nil
}

// alterQuotasResult is the result of entry re: its entity, and err's
// code and message (none for nil).
func alterQuotasResult(re kmsg.AlterClientQuotasRequestEntry, err error) kmsg.AlterClientQuotasResponseEntry {
	r := kmsg.NewAlterClientQuotasResponseEntry()
	for _, c := range re.Entity {
		ec := kmsg.NewAlterClientQuotasResponseEntryEntity()
		ec.Type, ec.Name = c.Type, c.Name
		r.Entity = append(r.Entity, ec)
	}
	r.ErrorCode, r.ErrorMessage = codeOf(err), messageOf(err)
	return r
}

// deniedAlterClientQuotas is the answer to an AlterClientQuotas the
// principal may not make: every entry CLUSTER_AUTHORIZATION_FAILED.
func deniedAlterClientQuotas(req *kmsg.AlterClientQuotasRequest) *kmsg.AlterClientQuotasResponse {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, re := range req.Entries {
		r := alterQuotasResult(re, nil)
		r.ErrorCode = int16(kafkaerr.ClusterAuthorizationFailed)
		resp.Entries = append(resp.Entries, r)
	}
	return resp
}
