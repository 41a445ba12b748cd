package quota

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// entity builds an entity from Kafka's path notation: "users/alice",
// "users/<default>/clients/app", "clients/<default>".
func entity(path string) Entity {
	var e Entity
	comp := func(name string) Component {
		if name == "<default>" {
			return Component{Set: true, Default: true}
		}
		return Component{Set: true, Name: name}
	}
	parts := strings.Split(path, "/")
	for i := 0; i+1 < len(parts); i += 2 {
		switch parts[i] {
		case "users":
			e.User = comp(parts[i+1])
		case "clients":
			e.ClientID = comp(parts[i+1])
		case "ips":
			e.IP = comp(parts[i+1])
		}
	}
	return e
}

func TestResolve(t *testing.T) {
	// All eight levels set the produce key, each with its own value: the
	// most specific one that matches wins.
	all := []string{
		"users/alice/clients/app",
		"users/alice/clients/<default>",
		"users/alice",
		"users/<default>/clients/app",
		"users/<default>/clients/<default>",
		"users/<default>",
		"clients/app",
		"clients/<default>",
	}
	levels := func(from int) []Quota {
		var qs []Quota
		for i, p := range all[from:] {
			qs = append(qs, Quota{Entity: entity(p), Values: map[string]float64{ProducerByteRate: float64(100 * (from + i + 1))}})
		}
		return qs
	}
	type want struct {
		value        float64
		user, client string
	}
	for _, tc := range []struct {
		name         string
		quotas       []Quota
		user, client string
		key          string
		want         *want // nil: no limit
	}{
		{"every level: user and client", levels(0), "alice", "app", ProducerByteRate, &want{100, "alice", "app"}},
		{"from user's default client", levels(1), "alice", "app", ProducerByteRate, &want{200, "alice", "app"}},
		{"from user", levels(2), "alice", "app", ProducerByteRate, &want{300, "alice", ""}},
		{"from default user's client", levels(3), "alice", "app", ProducerByteRate, &want{400, "alice", "app"}},
		{"from default user's default client", levels(4), "alice", "app", ProducerByteRate, &want{500, "alice", "app"}},
		{"from default user", levels(5), "alice", "app", ProducerByteRate, &want{600, "alice", ""}},
		{"from client", levels(6), "alice", "app", ProducerByteRate, &want{700, "", "app"}},
		{"from default client", levels(7), "alice", "app", ProducerByteRate, &want{800, "", "app"}},
		{"another user takes the default user's", levels(0), "bob", "app", ProducerByteRate, &want{400, "bob", "app"}},
		{"another user and client", levels(0), "bob", "other", ProducerByteRate, &want{500, "bob", "other"}},
		{"another key is not set", levels(0), "alice", "app", ConsumerByteRate, nil},
		{"nothing set", nil, "alice", "app", ProducerByteRate, nil},

		// One shape only: the measured pair is the shape's.
		{"client only: shared across users", []Quota{{entity("clients/app"), map[string]float64{ProducerByteRate: 10}}}, "alice", "app", ProducerByteRate, &want{10, "", "app"}},
		{"client only: another client", []Quota{{entity("clients/app"), map[string]float64{ProducerByteRate: 10}}}, "alice", "x", ProducerByteRate, nil},
		{"default client: each client its own", []Quota{{entity("clients/<default>"), map[string]float64{ProducerByteRate: 10}}}, "alice", "x", ProducerByteRate, &want{10, "", "x"}},
		{"default client: an empty client ID is not limited, as in Kafka", []Quota{{entity("clients/<default>"), map[string]float64{ProducerByteRate: 10}}}, "alice", "", ProducerByteRate, nil},
		{"user only: shared across clients", []Quota{{entity("users/alice"), map[string]float64{ProducerByteRate: 10}}}, "alice", "app", ProducerByteRate, &want{10, "alice", ""}},
		{"default user: each user its own", []Quota{{entity("users/<default>"), map[string]float64{ProducerByteRate: 10}}}, "ANONYMOUS", "app", ProducerByteRate, &want{10, "ANONYMOUS", ""}},
		{"user and client only", []Quota{{entity("users/alice/clients/<default>"), map[string]float64{ProducerByteRate: 10}}}, "alice", "app", ProducerByteRate, &want{10, "alice", "app"}},
		{"user and client only: another user", []Quota{{entity("users/alice/clients/<default>"), map[string]float64{ProducerByteRate: 10}}}, "bob", "app", ProducerByteRate, nil},

		// Mixed shapes: a user's quota beats a client's.
		{"user beats client", []Quota{
			{entity("clients/app"), map[string]float64{ProducerByteRate: 10}},
			{entity("users/alice"), map[string]float64{ProducerByteRate: 20}},
		}, "alice", "app", ProducerByteRate, &want{20, "alice", ""}},
		{"client for another user", []Quota{
			{entity("clients/app"), map[string]float64{ProducerByteRate: 10}},
			{entity("users/alice"), map[string]float64{ProducerByteRate: 20}},
		}, "bob", "app", ProducerByteRate, &want{10, "", "app"}},

		// Each key on its own: the produce quota from the user, the fetch
		// quota from the default client.
		{"keys apart: produce", []Quota{
			{entity("users/alice"), map[string]float64{ProducerByteRate: 20}},
			{entity("clients/<default>"), map[string]float64{ConsumerByteRate: 30}},
		}, "alice", "app", ProducerByteRate, &want{20, "alice", ""}},
		{"keys apart: fetch", []Quota{
			{entity("users/alice"), map[string]float64{ProducerByteRate: 20}},
			{entity("clients/<default>"), map[string]float64{ConsumerByteRate: 30}},
		}, "alice", "app", ConsumerByteRate, &want{30, "", "app"}},

		// IP entities are not client quotas.
		{"ip entities are left out", []Quota{{entity("ips/<default>"), map[string]float64{ConnectionCreationRate: 5}}}, "alice", "app", ConnectionCreationRate, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := NewSet(tc.quotas).Resolve(tc.key, tc.user, tc.client)
			if tc.want == nil {
				require.False(t, ok, "got %+v", got)
				return
			}
			require.True(t, ok)
			require.Equal(t, Limit{Value: tc.want.value, User: tc.want.user, ClientID: tc.want.client}, got)
		})
	}
}

func TestSetEmpty(t *testing.T) {
	require.True(t, (*Set)(nil).Empty())
	require.True(t, NewSet(nil).Empty())
	require.False(t, NewSet([]Quota{{entity("users/a"), map[string]float64{RequestPercentage: 50}}}).Empty())
	_, ok := (*Set)(nil).Resolve(ProducerByteRate, "a", "b")
	require.False(t, ok)
}
