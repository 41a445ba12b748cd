package quota

import (
	"cmp"
	"math"
	"strings"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Change sets or removes one quota value of an entity: an op of Kafka's
// AlterClientQuotas.
type Change struct {
	Key string
	// Value is the value set, when Remove is false.
	Value float64
	// Remove removes the entity's value of Key (nothing if it has none).
	Remove bool
}

// Alteration is one entry of AlterClientQuotas: an entity and the
// changes of its values.
type Alteration struct {
	Entity  Entity
	Changes []Change
}

// valueType is the type Kafka gives a quota key's value: a whole number
// that fits an int or a long, or a double.
type valueType uint8

const (
	valueDouble valueType = iota
	valueInt
	valueLong
)

// The keys each kind of entity takes, and their types (Kafka's
// QuotaConfig definitions).
var (
	clientKeyTypes = map[string]valueType{
		ProducerByteRate:       valueLong,
		ConsumerByteRate:       valueLong,
		RequestPercentage:      valueDouble,
		ControllerMutationRate: valueDouble,
	}
	ipKeyTypes = map[string]valueType{
		ConnectionCreationRate: valueInt,
	}
)

// invalid is an INVALID_REQUEST error.
func invalid(format string, args ...any) error {
	return kafkaerr.New(kafkaerr.InvalidRequest, format, args...)
}

// EachComponent calls f with the type and component of each component e
// has, in the order user, client-id, ip.
func (e Entity) EachComponent(f func(typ string, c Component)) {
	for _, x := range [...]struct {
		typ string
		c   Component
	}{{TypeUser, e.User}, {TypeClientID, e.ClientID}, {TypeIP, e.IP}} {
		if x.c.Set {
			f(x.typ, x.c)
		}
	}
}

// SetComponent sets e's component of type typ to name, or to the
// default when name is nil, as an AlterClientQuotas entry names it. An
// unknown type, or a type e already has, is INVALID_REQUEST, as Kafka
// answers; the name is checked by Validate.
func (e *Entity) SetComponent(typ string, name *string) error {
	var c *Component
	switch typ {
	case TypeUser:
		c = &e.User
	case TypeClientID:
		c = &e.ClientID
	case TypeIP:
		c = &e.IP
	default:
		return invalid("Unhandled client quota entity type: %s", typ)
	}
	if c.Set {
		return invalid("Invalid client quota entity, duplicate entity entry %s", typ)
	}
	*c = Component{Set: true, Default: name == nil}
	if name != nil {
		c.Name = *name
	}
	return nil
}

// Validate returns nil if e may hold quotas, else the INVALID_REQUEST
// error Kafka's AlterClientQuotas answers: an entity with no component,
// a named component with an empty name, an IP combined with a user or a
// client ID, an IP that is not an IP address. A component with a name
// and the default, or a name or the default and not Set, is invalid too
// (no request can make one). Kafka also takes a host name for an IP and
// resolves it; this check does no I/O, and takes IPv4 and IPv6
// addresses only (without a zone).
func (e Entity) Validate() error {
	set := 0
	var err error
	for _, x := range [...]struct {
		typ string
		c   Component
	}{{TypeUser, e.User}, {TypeClientID, e.ClientID}, {TypeIP, e.IP}} {
		c := x.c
		switch {
		case err != nil:
		case !c.Set && (c.Default || c.Name != ""):
			err = invalid("the %s component is not set, yet has a name or the default", x.typ)
		case !c.Set:
		case c.Default && c.Name != "":
			err = invalid("the %s component is both the default and the name %q", x.typ, c.Name)
		case !c.Default && c.Name == "":
			err = invalid("Empty %s not supported", x.typ)
		default:
			set++
		}
	}
	switch {
	case err != nil:
		return err
	case set == 0:
		return invalid("Invalid empty client quota entity")
	case e.IP.Set && (e.User.Set || e.ClientID.Set):
		return invalid("Invalid quota entity combination, IP entity should not be combined with User or ClientId")
	case e.IP.Set && !e.IP.Default && !IsIPAddress(e.IP.Name):
		return invalid("%s is not a valid IP address", e.IP.Name)
	}
	return nil
}

// ValidateValue returns nil if a valid entity e may have value for key,
// else the INVALID_REQUEST error Kafka answers: a key the entity's kind
// does not take (connection_creation_rate is an IP entity's only, the
// other keys a client entity's), a value not above 0, a fractional value
// of a whole-number key (producer_byte_rate, consumer_byte_rate,
// connection_creation_rate), or one too large for its type (a long, an
// int). A value that is not a finite number is invalid too (Kafka lets
// NaN and infinities through).
func (e Entity) ValidateValue(key string, value float64) error {
	keys := clientKeyTypes
	if e.IP.Set {
		keys = ipKeyTypes
	}
	t, ok := keys[key]
	switch {
	case !ok:
		return invalid("Invalid configuration key %s", key)
	case math.IsNaN(value) || math.IsInf(value, 0):
		return invalid("Quota %s must be a finite number, not %v", key, value)
	case value <= 0:
		return invalid("Quota %s must be greater than 0", key)
	case t == valueInt && value > math.MaxInt32:
		return invalid("Proposed value for %s is too large for an INT.", key)
	case t == valueLong && value >= math.MaxInt64: // 2^63: the float64 nearest MaxInt64 does not fit
		return invalid("Proposed value for %s is too large for a LONG.", key)
	case t != valueDouble && math.Abs(math.Mod(value, 1)) > 1e-6:
		return invalid("%s cannot be a fractional value.", key)
	}
	return nil
}

// Validate returns nil if a may be applied, else the INVALID_REQUEST
// error Kafka answers for its entry, checked in Kafka's order: a key
// changed twice, then the entity (Entity.Validate), then each value set
// (Entity.ValidateValue). Removals are not checked: removing a key the
// entity does not have changes nothing.
func (a Alteration) Validate() error {
	for i, c := range a.Changes {
		for _, d := range a.Changes[:i] {
			if d.Key == c.Key {
				return invalid("Duplicate quota key %s not updating quota for this entity %v", c.Key, a.Entity)
			}
		}
	}
	if err := a.Entity.Validate(); err != nil {
		return err
	}
	for _, c := range a.Changes {
		if c.Remove {
			continue
		}
		if err := a.Entity.ValidateValue(c.Key, c.Value); err != nil {
			return err
		}
	}
	return nil
}

// CompareEntities orders entities by user, then client ID, then IP; an
// absent component first, then the default, then names in byte order.
func CompareEntities(a, b Entity) int {
	return cmp.Or(compareComponents(a.User, b.User), compareComponents(a.ClientID, b.ClientID), compareComponents(a.IP, b.IP))
}

func compareComponents(a, b Component) int {
	rank := func(c Component) int {
		switch {
		case !c.Set:
			return 0
		case c.Default:
			return 1
		}
		return 2
	}
	return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a.Name, b.Name))
}

// String returns e as {type=name, ...}, in the order user, client-id,
// ip, the default written <default> (as kadm writes an entity).
func (e Entity) String() string {
	var b strings.Builder
	b.WriteString("{")
	e.EachComponent(func(typ string, c Component) {
		if b.Len() > 1 {
			b.WriteString(", ")
		}
		b.WriteString(typ + "=")
		if c.Default {
			b.WriteString("<default>")
		} else {
			b.WriteString(c.Name)
		}
	})
	b.WriteString("}")
	return b.String()
}

// IsIPAddress reports whether s is an IPv4 address in dotted decimal
// (no leading zeros) or an IPv6 address (hex groups, one "::" at most,
// optionally ending in an IPv4 address; no zone): the strings
// net/netip.ParseAddr takes, but a zone. It is written out here so that
// the coordinator's pure core, which validates entities, links no
// networking package.
func IsIPAddress(s string) bool {
	return isIPv4Text(s) || isIPv6Text(s)
}

// isIPv4Text reports whether s is four decimal octets, dot-separated,
// each 0 to 255 without a leading zero.
func isIPv4Text(s string) bool {
	for i := range 4 {
		if i > 0 {
			if s == "" || s[0] != '.' {
				return false
			}
			s = s[1:]
		}
		n, v := 0, 0
		for n < len(s) && n < 4 && s[n] >= '0' && s[n] <= '9' {
			v = v*10 + int(s[n]-'0')
			n++
		}
		if n == 0 || n > 3 || v > 255 || (n > 1 && s[0] == '0') {
			return false
		}
		s = s[n:]
	}
	return s == ""
}

// isIPv6Text reports whether s is an IPv6 address without a zone.
func isIPv6Text(s string) bool {
	groups, ellipsis := 0, false
	if strings.HasPrefix(s, "::") {
		ellipsis, s = true, s[2:]
	}
	for s != "" {
		if !strings.Contains(s, ":") && strings.Contains(s, ".") {
			// An IPv4 address ends it, and stands for two groups.
			if !isIPv4Text(s) {
				return false
			}
			groups += 2
			break
		}
		n := 0
		for n < len(s) && n < 5 && isHexDigit(s[n]) {
			n++
		}
		if n == 0 || n > 4 {
			return false
		}
		groups++
		s = s[n:]
		if s == "" {
			break
		}
		if s[0] != ':' || len(s) == 1 {
			return false
		}
		s = s[1:]
		if s[0] == ':' {
			if ellipsis {
				return false
			}
			ellipsis, s = true, s[1:]
		}
	}
	if ellipsis {
		return groups < 8 // "::" stands for one zero group at least
	}
	return groups == 8
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
