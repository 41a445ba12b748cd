package state

import (
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/quota"
)

// The model of client quotas: the values by (entity, key), and the
// version counting the records their changes log.

// mEntity is an entity the model draws, and whether it is valid, and an
// IP entity.
type mEntity struct {
	e         quota.Entity
	valid, ip bool
}

var (
	qNamed    = func(n string) quota.Component { return quota.Component{Set: true, Name: n} }
	qDefault  = quota.Component{Set: true, Default: true}
	mEntities = []mEntity{
		{quota.Entity{User: qNamed("alice")}, true, false},
		{quota.Entity{User: qDefault}, true, false},
		{quota.Entity{User: qNamed("alice"), ClientID: qNamed("app")}, true, false},
		{quota.Entity{ClientID: qDefault}, true, false},
		{quota.Entity{IP: qNamed("10.0.0.1")}, true, true},
		{quota.Entity{IP: qDefault}, true, true},
		{quota.Entity{}, false, false},
		{quota.Entity{User: qNamed("")}, false, false},
		{quota.Entity{User: qNamed("alice"), IP: qDefault}, false, true},
		{quota.Entity{IP: qNamed("host")}, false, true},
	}
	mQuotaKeys   = []string{quota.ProducerByteRate, quota.RequestPercentage, quota.ConnectionCreationRate, "bogus"}
	mQuotaValues = []float64{1024, 2048, 2.5, 0, -1}
)

// quotaValueOK is the model's rule for a value set: the key is the
// entity kind's, the value positive, and whole for the byte and
// connection rates.
func quotaValueOK(ip bool, key string, v float64) bool {
	switch key {
	case quota.ProducerByteRate:
		return !ip && v > 0 && v == float64(int64(v))
	case quota.RequestPercentage:
		return !ip && v > 0
	case quota.ConnectionCreationRate:
		return ip && v > 0 && v == float64(int64(v))
	}
	return false
}

func (s *modelRun) quotaActions(actions map[string]func(*rapid.T)) {
	m := s.m
	actions["clientQuotas"] = func(t *rapid.T) {
		var entries []quota.Alteration
		var drawn []mEntity
		for range rapid.IntRange(1, 3).Draw(t, "entries") {
			me := rapid.SampledFrom(mEntities).Draw(t, "entity")
			a := quota.Alteration{Entity: me.e}
			for range rapid.IntRange(0, 3).Draw(t, "changes") {
				a.Changes = append(a.Changes, quota.Change{
					Key: rapid.SampledFrom(mQuotaKeys).Draw(t, "key"), Value: rapid.SampledFrom(mQuotaValues).Draw(t, "value"),
					Remove: rapid.IntRange(0, 3).Draw(t, "remove") == 0,
				})
			}
			entries, drawn = append(entries, a), append(drawn, me)
		}
		validateOnly := rapid.IntRange(0, 4).Draw(t, "validateOnly") == 0
		o := &ClientQuotasOp{BaseOp: s.base(), Entries: entries, ValidateOnly: validateOnly}
		s.decide(o)
		require.NoError(t, <-o.Done)
		require.Len(t, o.Errs, len(entries))
		for i, a := range entries {
			ok := drawn[i].valid
			for j, b := range entries {
				if j != i && b.Entity == a.Entity {
					ok = false // an entity twice
				}
			}
			keys := map[string]bool{}
			for _, c := range a.Changes {
				if keys[c.Key] || (!c.Remove && !quotaValueOK(drawn[i].ip, c.Key, c.Value)) {
					ok = false
				}
				keys[c.Key] = true
			}
			if !ok {
				require.Equal(t, kafkaerr.InvalidRequest, errCode(o.Errs[i]), "entry %d of %+v", i, entries)
				continue
			}
			require.NoError(t, o.Errs[i], "entry %d of %+v", i, entries)
			if validateOnly {
				continue
			}
			for _, c := range a.Changes {
				k := QuotaKey{Entity: a.Entity, Key: c.Key}
				old, has := m.quotas[k]
				switch {
				case c.Remove && has:
					delete(m.quotas, k)
					m.quotaVer++
				case !c.Remove && (!has || old != c.Value):
					m.quotas[k] = c.Value
					m.quotaVer++
				}
			}
		}
	}
}
