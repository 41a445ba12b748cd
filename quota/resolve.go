package quota

// Resolution, as Apache Kafka's default quota callback (in its
// ClientQuotaManager) does it.
//
// Each key is resolved on its own: Kafka keeps one quota manager for each
// of producer_byte_rate, consumer_byte_rate and request_percentage, and an
// entity takes part in a key's resolution only if it sets that key. So a
// connection may take its produce quota from /users/alice and its fetch
// quota from /clients/<default>.
//
// For one key, a connection of user U with client ID C takes the first of
// these entities that sets the key (most specific first):
//
//	/users/U/clients/C
//	/users/U/clients/<default>
//	/users/U
//	/users/<default>/clients/C
//	/users/<default>/clients/<default>
//	/users/<default>
//	/clients/C
//	/clients/<default>
//
// Which entity matched also says which connections share the quota: the
// rate is measured over every connection with the same (user, client ID)
// pair, where an entity without a user component measures across users
// and one without a client-id component across client IDs. A match at
// /users/<default> gives every user a quota of its own, shared by its
// client IDs; one at /clients/<default> gives every client ID its own,
// shared by its users.
//
// Kafka resolves in two steps, and so do we, so that the odd cases come
// out the same: first the pair that measures the rate (its metric tags),
// from the shapes of the entities that set the key; then the value, by
// looking the pair up. When entities of one shape only set the key (only
// user-and-client entities, say), the pair is fixed by that shape: ("",
// C) for client-id entities, (U, "") for user entities, (U, C) for
// user-and-client ones. An empty client ID (or user) on the measuring
// side finds no client (or user) entity, so a connection with client ID
// "" is not limited by /clients/<default> alone, as in Kafka.

// Limit is the quota of one key that applies to a connection.
type Limit struct {
	// Value is the bound, in the key's unit.
	Value float64
	// User and ClientID say which connections share the measured rate:
	// those with this user and client ID, "" meaning any (Kafka's quota
	// metric tags).
	User, ClientID string
}

// Set is quotas indexed for Resolve. It is immutable after NewSet, and
// safe for concurrent use.
type Set struct {
	keys map[string]*keyIndex
}

// shapes of client entities, as Kafka's quota types enabled.
const (
	shapeClient     = 1 << iota // client-id only
	shapeUser                   // user only
	shapeUserClient             // user and client-id
)

// keyIndex is the client entities that set one key.
type keyIndex struct {
	shapes int
	values map[Entity]float64
}

// NewSet indexes quotas. Entities with an IP component, and entities with
// neither a user nor a client ID, are left out: they are not client
// quotas. A later quota of the same entity replaces an earlier one's
// values key by key.
func NewSet(quotas []Quota) *Set {
	s := &Set{keys: map[string]*keyIndex{}}
	for _, q := range quotas {
		e := q.Entity
		if e.IP.Set || !e.User.Set && !e.ClientID.Set {
			continue
		}
		shape := shapeClient
		switch {
		case e.User.Set && e.ClientID.Set:
			shape = shapeUserClient
		case e.User.Set:
			shape = shapeUser
		}
		e = canonical(e)
		for k, v := range q.Values {
			ix := s.keys[k]
			if ix == nil {
				ix = &keyIndex{values: map[Entity]float64{}}
				s.keys[k] = ix
			}
			ix.shapes |= shape
			ix.values[e] = v
		}
	}
	return s
}

// canonical drops the name of a default component, so that entities
// compare by what they mean.
func canonical(e Entity) Entity {
	if e.User.Default {
		e.User.Name = ""
	}
	if e.ClientID.Default {
		e.ClientID.Name = ""
	}
	return e
}

// Empty reports whether s holds no client quota.
func (s *Set) Empty() bool { return s == nil || len(s.keys) == 0 }

// Resolve returns the limit of key for a connection of user (a principal's
// name, "ANONYMOUS" without authentication) with client ID clientID, and
// false if no quota of key applies.
func (s *Set) Resolve(key, user, clientID string) (Limit, bool) {
	if s == nil {
		return Limit{}, false
	}
	ix := s.keys[key]
	if ix == nil {
		return Limit{}, false
	}
	u, c := ix.tags(user, clientID)
	v, ok := ix.limit(u, c)
	if !ok {
		return Limit{}, false
	}
	return Limit{Value: v, User: u, ClientID: c}, true
}

// tags returns the (user, client ID) pair whose rate is measured, as
// Kafka's quota metric tags.
func (ix *keyIndex) tags(user, clientID string) (string, string) {
	switch ix.shapes {
	case 0, shapeClient:
		return "", clientID
	case shapeUser:
		return user, ""
	case shapeUserClient:
		return user, clientID
	}
	switch {
	case ix.has(named(user), named(clientID)), ix.has(named(user), deflt):
		return user, clientID
	case ix.has(named(user), absent):
		return user, ""
	case ix.has(deflt, named(clientID)), ix.has(deflt, deflt):
		return user, clientID
	case ix.has(deflt, absent):
		return user, ""
	}
	return "", clientID
}

// limit looks the measured pair up, as Kafka's quota limit does.
func (ix *keyIndex) limit(user, clientID string) (float64, bool) {
	var chain [][2]Component
	switch {
	case user != "" && clientID != "":
		chain = [][2]Component{{named(user), named(clientID)}, {named(user), deflt}, {deflt, named(clientID)}, {deflt, deflt}}
	case user != "":
		chain = [][2]Component{{named(user), absent}, {deflt, absent}}
	case clientID != "":
		chain = [][2]Component{{absent, named(clientID)}, {absent, deflt}}
	}
	for _, uc := range chain {
		if v, ok := ix.values[Entity{User: uc[0], ClientID: uc[1]}]; ok {
			return v, true
		}
	}
	return 0, false
}

func (ix *keyIndex) has(u, c Component) bool {
	_, ok := ix.values[Entity{User: u, ClientID: c}]
	return ok
}

var (
	absent Component
	deflt  = Component{Set: true, Default: true}
)

func named(n string) Component { return Component{Set: true, Name: n} }
