package state

import (
	"encoding/binary"
	"math"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/quota"
)

// Client quotas (Kafka's AlterClientQuotas, DescribeClientQuotas): an
// entity's values by key, records of shard 0 like the security records.
// A record sets or removes one value of one entity, as Kafka's
// ClientQuotaRecord does; the view holds the values by (entity, key),
// and QuotaVersion counts the quota records applied.

// QuotaKey names one quota value: an entity's, for a key.
type QuotaKey struct {
	Entity quota.Entity
	Key    string
}

// QuotaSetRecord sets an entity's value of a key.
type QuotaSetRecord struct {
	QuotaKey
	Value float64
}

// QuotaRemoveRecord removes an entity's value of a key (which it had).
type QuotaRemoveRecord struct {
	QuotaKey
}

func (QuotaSetRecord) Kind() recordType { return recQuotaSet }

func (QuotaRemoveRecord) Kind() recordType { return recQuotaRemove }

func (r QuotaSetRecord) AppendTo(b []byte) []byte {
	b = appendQuotaKey(b, r.QuotaKey)
	return binary.BigEndian.AppendUint64(b, math.Float64bits(r.Value))
}

func (r QuotaRemoveRecord) AppendTo(b []byte) []byte { return appendQuotaKey(b, r.QuotaKey) }

// The kinds of an entity's component in a record. Part of the format.
const (
	componentAbsent  = 0
	componentDefault = 1
	componentNamed   = 2
)

// appendQuotaKey appends the entity, its user, client-id and ip
// components each as a kind byte (then the name, when named), and the
// key.
func appendQuotaKey(b []byte, k QuotaKey) []byte {
	for _, c := range [...]quota.Component{k.Entity.User, k.Entity.ClientID, k.Entity.IP} {
		switch {
		case !c.Set:
			b = append(b, componentAbsent)
		case c.Default:
			b = append(b, componentDefault)
		default:
			b = append(b, componentNamed)
			b = AppendString(b, c.Name)
		}
	}
	return AppendString(b, k.Key)
}

// component reads what appendQuotaKey wrote of one component.
func (d *Decoder) component() quota.Component {
	switch kind := d.byte(); kind {
	case componentAbsent:
		return quota.Component{}
	case componentDefault:
		return quota.Component{Set: true, Default: true}
	case componentNamed:
		c := quota.Component{Set: true, Name: d.string()}
		if d.Err == nil && c.Name == "" {
			d.Fail("a quota entity component with an empty name")
		}
		return c
	default:
		d.Fail("unknown quota entity component kind %d", kind)
		return quota.Component{}
	}
}

// quotaKey reads what appendQuotaKey wrote: an entity recordEntity
// accepts and a key that is not empty.
func (d *Decoder) quotaKey() QuotaKey {
	var k QuotaKey
	k.Entity.User, k.Entity.ClientID, k.Entity.IP = d.component(), d.component(), d.component()
	k.Key = d.string()
	if d.Err == nil && (!recordEntity(k.Entity) || k.Key == "") {
		d.Fail("quota entity %v, key %q", k.Entity, k.Key)
	}
	return k
}

// recordEntity reports whether an entity may be in a record: it has a
// component, and an IP one alone. Part of the format. It is looser than
// quota.Entity.Validate on purpose (no IP syntax, any key), as
// recordBinding is: a record decodes whatever validation the leader that
// wrote it applied.
func recordEntity(e quota.Entity) bool {
	if e.IP.Set {
		return !e.User.Set && !e.ClientID.Set
	}
	return e.User.Set || e.ClientID.Set
}

func (d *Decoder) quotaSet() QuotaSetRecord {
	r := QuotaSetRecord{QuotaKey: d.quotaKey(), Value: d.float64()}
	// The leader sets positive finite values only; each has one encoding.
	if d.Err == nil && !(r.Value > 0 && !math.IsInf(r.Value, 1)) {
		d.Fail("quota value %v", r.Value)
	}
	return r
}

func (d *Decoder) quotaRemove() QuotaRemoveRecord { return QuotaRemoveRecord{QuotaKey: d.quotaKey()} }

// quotaValue returns the value of k, and whether there is one.
func (v *View) quotaValue(k QuotaKey) (float64, bool) {
	for ; v != nil; v = v.Parent {
		if x, ok := v.Quotas[k]; ok {
			return x, x != 0
		}
	}
	return 0, false
}

// applyQuota applies a quota record to the view.
func (v *View) applyQuota(r Record) {
	switch r := r.(type) {
	case QuotaSetRecord:
		v.Quotas[r.QuotaKey] = r.Value
	case QuotaRemoveRecord:
		if v.Parent == nil {
			delete(v.Quotas, r.QuotaKey)
		} else {
			v.Quotas[r.QuotaKey] = 0
		}
	}
	v.QuotaVersion++
}

// EachQuota calls f with every quota value of v (the newest of each,
// from v or a parent), in no order.
func (v *View) EachQuota(f func(k QuotaKey, value float64)) {
	seen := map[QuotaKey]bool{}
	for w := v; w != nil; w = w.Parent {
		for k := range w.Quotas {
			if !seen[k] {
				seen[k] = true
				if x, ok := v.quotaValue(k); ok {
					f(k, x)
				}
			}
		}
	}
}

// ClientQuotasOp decides AlterClientQuotas: Errs are the answers, one
// per entry.
type ClientQuotasOp struct {
	BaseOp
	Entries []quota.Alteration
	// ValidateOnly decides the answers and logs nothing.
	ValidateOnly bool
	Errs         []error
}

func (o *ClientQuotasOp) Coords() int { return max(len(o.Entries), 1) }

// Check decides as Kafka's ClientQuotaControlManager.alterClientQuotas
// does, entity by entity: an entity in two entries is INVALID_REQUEST
// for both, and neither is applied; an entry that is not valid
// (quota.Alteration.Validate) answers its error and changes nothing;
// the others get a record per value that changes (a value set to what
// it is, or a removal of a value the entity has not, logs nothing).
func (o *ClientQuotasOp) Check(g *Group) {
	o.Errs = make([]error, len(o.Entries))
	count := make(map[quota.Entity]int, len(o.Entries))
	for _, a := range o.Entries {
		count[a.Entity]++
	}
	for i, a := range o.Entries {
		if count[a.Entity] > 1 {
			o.Errs[i] = kafkaerr.New(kafkaerr.InvalidRequest, "Ignoring duplicate entity %v", a.Entity)
			continue
		}
		if err := a.Validate(); err != nil {
			o.Errs[i] = err
			continue
		}
		if o.ValidateOnly {
			continue
		}
		for _, c := range a.Changes {
			k := QuotaKey{Entity: a.Entity, Key: c.Key}
			old, has := g.Spec.quotaValue(k)
			switch {
			case c.Remove && has:
				g.add(QuotaRemoveRecord{QuotaKey: k})
			case !c.Remove && (!has || old != c.Value):
				g.add(QuotaSetRecord{QuotaKey: k, Value: c.Value})
			}
		}
	}
}
