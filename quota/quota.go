// Package quota is Kafka's client quotas: the entities an administrator
// sets quotas for (AlterClientQuotas, DescribeClientQuotas) and their
// values.
//
// An entity names who a quota applies to, with up to three components:
//
//	user       a user principal's name, or the default for every user
//	client-id  a client ID, or the default for every client ID
//	ip         a client's IP address, or the default for every IP
//
// A user, a client ID, or both make a client entity, whose quotas are
// byte rates and a share of the broker's request time; an IP makes an
// IP entity, whose quota is a connection creation rate. The two kinds are
// never combined in one entity.
//
// The keys and their units are Kafka's:
//
//	producer_byte_rate        bytes a second produced, per broker
//	consumer_byte_rate        bytes a second fetched, per broker
//	request_percentage        percent of one request thread's time, per broker
//	controller_mutation_rate  partitions created or deleted a second
//	connection_creation_rate  connections accepted a second (ip entities)
//
// The names of entity types and keys are the protocol's: they are part
// of the AlterClientQuotas and DescribeClientQuotas requests and of the
// coordinator's records, and never change.
package quota

// The entity types, as the protocol names them.
const (
	TypeUser     = "user"
	TypeClientID = "client-id"
	TypeIP       = "ip"
)

// The quota keys, as the protocol names them.
const (
	ProducerByteRate       = "producer_byte_rate"
	ConsumerByteRate       = "consumer_byte_rate"
	RequestPercentage      = "request_percentage"
	ControllerMutationRate = "controller_mutation_rate"
	ConnectionCreationRate = "connection_creation_rate"
)

// Component is one component of an Entity. The zero value is absent.
type Component struct {
	// Set says the entity has this component.
	Set bool
	// Default, with Set, stands for every name that has no entity of
	// its own (Kafka's "<default>"); Name is then "".
	Default bool
	// Name is the user, client ID or IP address, with Set and not
	// Default.
	Name string
}

// Entity is who a quota applies to. It is comparable: a map key.
type Entity struct {
	User, ClientID, IP Component
}

// Quota is an entity's quota values, by key.
type Quota struct {
	Entity Entity
	Values map[string]float64
}
