package quota

import "github.com/diskless-go/diskless/kafkaerr"

// Match is how a FilterComponent matches an entity's component of its
// type. The values are the protocol's match_type.
type Match int8

const (
	// MatchExact matches the component named Name (not the default).
	MatchExact Match = 0
	// MatchDefault matches the default component.
	MatchDefault Match = 1
	// MatchAny matches any component of the type, named or the default.
	MatchAny Match = 2
)

// FilterComponent is one component of a DescribeClientQuotas filter.
type FilterComponent struct {
	// Type is the entity type: TypeUser, TypeClientID or TypeIP.
	Type  string
	Match Match
	// Name is the name MatchExact matches.
	Name string
}

// Filter selects entities, as Kafka's DescribeClientQuotas does: an
// entity matches when it has a component that matches each of the
// filter's; with Strict, it has no other component either. A filter with
// no components matches every entity (none, with Strict).
type Filter struct {
	Components []FilterComponent
	Strict     bool
}

// Validate returns nil if f may be used, else the error Kafka answers:
// INVALID_REQUEST for an empty entity type, a type named twice, an
// unknown match type, or an IP component with a user or client-id one;
// UNSUPPORTED_VERSION for an unknown entity type.
func (f Filter) Validate() error {
	seen := map[string]bool{}
	for _, c := range f.Components {
		switch {
		case c.Type == "":
			return invalid("Invalid empty entity type.")
		case seen[c.Type]:
			return invalid("Entity type %s cannot appear more than once in the filter.", c.Type)
		case c.Type != TypeUser && c.Type != TypeClientID && c.Type != TypeIP:
			return kafkaerr.New(kafkaerr.UnsupportedVersion, "Unsupported entity type %s", c.Type)
		case c.Match != MatchExact && c.Match != MatchDefault && c.Match != MatchAny:
			return invalid("Unexpected match type %d for entity type %s", c.Match, c.Type)
		}
		seen[c.Type] = true
	}
	if seen[TypeIP] && (seen[TypeUser] || seen[TypeClientID]) {
		return invalid("Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.")
	}
	return nil
}

// Matches reports whether e matches the valid filter f.
func (f Filter) Matches(e Entity) bool {
	if f.Strict {
		n := 0
		e.EachComponent(func(string, Component) { n++ })
		if n != len(f.Components) {
			return false
		}
	}
	for _, fc := range f.Components {
		var c Component
		switch fc.Type {
		case TypeUser:
			c = e.User
		case TypeClientID:
			c = e.ClientID
		case TypeIP:
			c = e.IP
		}
		switch {
		case !c.Set:
			return false
		case fc.Match == MatchDefault && !c.Default:
			return false
		case fc.Match == MatchExact && (c.Default || c.Name != fc.Name):
			return false
		}
	}
	return true
}
