package store

import (
	"context"
	"database/sql"
	"maps"
	"slices"

	"github.com/diskless-go/diskless/coordinator/state"
	"github.com/diskless-go/diskless/quota"
)

// The writer's statements of quota records.
const (
	sqlUpsertQuota = "INSERT INTO client_quotas (user_kind, user_name, client_kind, client_name, ip_kind, ip_name, quota_key, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?) " +
		"ON CONFLICT (user_kind, user_name, client_kind, client_name, ip_kind, ip_name, quota_key) DO UPDATE SET value = excluded.value"
	sqlDeleteQuota = "DELETE FROM client_quotas WHERE user_kind = ? AND user_name = ? AND client_kind = ? AND client_name = ? AND ip_kind = ? AND ip_name = ? AND quota_key = ?"
	sqlLoadQuotas  = "SELECT user_kind, user_name, client_kind, client_name, ip_kind, ip_name, quota_key, value FROM client_quotas"
)

// The kinds of a component in the table client_quotas.
const (
	kindAbsent  = 0
	kindDefault = 1
	kindNamed   = 2
)

// componentColumns returns the kind and name columns of a component.
func componentColumns(c quota.Component) (int64, string) {
	switch {
	case !c.Set:
		return kindAbsent, ""
	case c.Default:
		return kindDefault, ""
	}
	return kindNamed, c.Name
}

// componentOf returns the component of a kind and name.
func componentOf(kind int64, name string) quota.Component {
	switch kind {
	case kindDefault:
		return quota.Component{Set: true, Default: true}
	case kindNamed:
		return quota.Component{Set: true, Name: name}
	}
	return quota.Component{}
}

// quotaKeyArgs returns the key columns of k.
func quotaKeyArgs(k state.QuotaKey) []any {
	uk, un := componentColumns(k.Entity.User)
	ck, cn := componentColumns(k.Entity.ClientID)
	ik, in := componentColumns(k.Entity.IP)
	return []any{uk, un, ck, cn, ik, in, k.Key}
}

// writeQuota writes a quota record.
func (s *DB) writeQuota(ctx context.Context, r state.Record) error {
	var err error
	switch r := r.(type) {
	case state.QuotaSetRecord:
		_, err = s.exec(ctx, sqlUpsertQuota, append(quotaKeyArgs(r.QuotaKey), r.Value)...)
	case state.QuotaRemoveRecord:
		_, err = s.exec(ctx, sqlDeleteQuota, quotaKeyArgs(r.QuotaKey)...)
	}
	return err
}

// loadQuota reads a client_quotas row into v.
func loadQuota(rows *sql.Rows, v *state.View) error {
	var uk, ck, ik int64
	var un, cn, in string
	var k state.QuotaKey
	var value float64
	if err := rows.Scan(&uk, &un, &ck, &cn, &ik, &in, &k.Key, &value); err != nil {
		return err
	}
	k.Entity = quota.Entity{User: componentOf(uk, un), ClientID: componentOf(ck, cn), IP: componentOf(ik, in)}
	v.Quotas[k] = value
	return nil
}

// QuotasState is the cluster's client quotas, as Coordinator.ClientQuotas
// returns them.
type QuotasState struct {
	// Version grows with every change of a quota value; every broker
	// sees the same Version for the same state.
	Version int64
	// Quotas are every entity that has a value, ordered by
	// quota.CompareEntities. Nil when Changed is false.
	Quotas []quota.Quota
	// Changed is false when Version is the one the caller passed: the
	// list is then left out.
	Changed bool
}

// QuotasSnapshot is the client quotas as one applied entry left them:
// immutable once published.
type QuotasSnapshot struct {
	version int64
	quotas  []quota.Quota // in CompareEntities order
}

// newQuotasSnapshot returns the client quotas of the committed view.
func newQuotasSnapshot(root *state.View) *QuotasSnapshot {
	s := &QuotasSnapshot{version: root.QuotaVersion}
	by := map[quota.Entity]map[string]float64{}
	root.EachQuota(func(k state.QuotaKey, value float64) {
		if by[k.Entity] == nil {
			by[k.Entity] = map[string]float64{}
		}
		by[k.Entity][k.Key] = value
	})
	for e, values := range by {
		s.quotas = append(s.quotas, quota.Quota{Entity: e, Values: values})
	}
	slices.SortFunc(s.quotas, func(a, b quota.Quota) int { return quota.CompareEntities(a.Entity, b.Entity) })
	return s
}

// State returns the state for a caller that has version since: copies
// the caller owns.
func (s *QuotasSnapshot) State(since int64) QuotasState {
	if since == s.version {
		return QuotasState{Version: s.version}
	}
	st := QuotasState{Version: s.version, Changed: true, Quotas: make([]quota.Quota, len(s.quotas))}
	for i, q := range s.quotas {
		st.Quotas[i] = quota.Quota{Entity: q.Entity, Values: maps.Clone(q.Values)}
	}
	return st
}
