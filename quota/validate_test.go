package quota

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskless-go/diskless/kafkaerr"
)

// dflt is a default component (named, in resolve.go, makes a named one).
var dflt = Component{Set: true, Default: true}

func TestEntityValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		e    Entity
		ok   bool
	}{
		{"user", Entity{User: named("alice")}, true},
		{"default user", Entity{User: dflt}, true},
		{"client", Entity{ClientID: named("app")}, true},
		{"default client", Entity{ClientID: dflt}, true},
		{"user and client", Entity{User: named("alice"), ClientID: named("app")}, true},
		{"default user and client", Entity{User: dflt, ClientID: dflt}, true},
		{"ipv4", Entity{IP: named("10.0.0.1")}, true},
		{"ipv6", Entity{IP: named("fe80::1")}, true},
		{"default ip", Entity{IP: dflt}, true},
		{"empty", Entity{}, false},
		{"empty user name", Entity{User: named("")}, false},
		{"empty client name", Entity{User: named("a"), ClientID: named("")}, false},
		{"ip and user", Entity{User: named("a"), IP: named("10.0.0.1")}, false},
		{"ip and client", Entity{ClientID: dflt, IP: dflt}, false},
		{"host name", Entity{IP: named("localhost")}, false},
		{"default with a name", Entity{User: Component{Set: true, Default: true, Name: "x"}}, false},
		{"not set with a name", Entity{User: named("a"), ClientID: Component{Name: "x"}}, false},
		{"not set, default", Entity{User: named("a"), IP: Component{Default: true}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.e.Validate()
			if c.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(err), "%v", err)
		})
	}
}

func TestValidateValue(t *testing.T) {
	client, ip := Entity{User: named("alice")}, Entity{IP: dflt}
	for _, c := range []struct {
		e     Entity
		key   string
		value float64
		ok    bool
	}{
		{client, ProducerByteRate, 1024, true},
		{client, ConsumerByteRate, 1, true},
		{client, ConsumerByteRate, 1 << 62, true},
		{client, RequestPercentage, 12.5, true},
		{client, ControllerMutationRate, 0.5, true},
		{client, ProducerByteRate, 1024.0000001, true}, // within Kafka's epsilon
		{ip, ConnectionCreationRate, 100, true},
		{ip, ConnectionCreationRate, math.MaxInt32, true},
		{client, ConnectionCreationRate, 100, false},
		{ip, ProducerByteRate, 100, false},
		{client, "unknown_key", 1, false},
		{client, "", 1, false},
		{client, ProducerByteRate, 0, false},
		{client, ProducerByteRate, -1, false},
		{client, RequestPercentage, -0.5, false},
		{client, ProducerByteRate, 10.5, false},
		{ip, ConnectionCreationRate, 1.5, false},
		{client, ProducerByteRate, math.Ldexp(1, 63), false},
		{ip, ConnectionCreationRate, math.MaxInt32 + 1, false},
		{client, RequestPercentage, math.NaN(), false},
		{client, RequestPercentage, math.Inf(1), false},
	} {
		err := c.e.ValidateValue(c.key, c.value)
		if c.ok {
			require.NoError(t, err, "%s = %v", c.key, c.value)
			continue
		}
		require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(err), "%s = %v: %v", c.key, c.value, err)
	}
}

func TestAlterationValidate(t *testing.T) {
	e := Entity{User: named("alice")}
	require.NoError(t, Alteration{Entity: e, Changes: []Change{{Key: ProducerByteRate, Value: 10}, {Key: ConsumerByteRate, Remove: true}}}.Validate())
	// A removal is not checked: removing what the entity cannot have
	// changes nothing.
	require.NoError(t, Alteration{Entity: e, Changes: []Change{{Key: "unknown", Remove: true}}}.Validate())
	require.NoError(t, Alteration{Entity: e}.Validate())
	for _, a := range []Alteration{
		{Entity: e, Changes: []Change{{Key: ProducerByteRate, Value: 10}, {Key: ProducerByteRate, Remove: true}}},
		{Entity: Entity{}, Changes: []Change{{Key: ProducerByteRate, Value: 10}}},
		{Entity: e, Changes: []Change{{Key: ProducerByteRate, Value: 10}, {Key: "unknown", Value: 1}}},
	} {
		require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(a.Validate()), "%+v", a)
	}
	err := Alteration{Entity: Entity{User: dflt, ClientID: named("app")}, Changes: []Change{{Key: "k", Remove: true}, {Key: "k", Remove: true}}}.Validate()
	require.ErrorContains(t, err, "entity {user=<default>, client-id=app}")
	require.Equal(t, "{ip=10.0.0.1}", Entity{IP: named("10.0.0.1")}.String())
	require.Equal(t, "{}", Entity{}.String())
}

func TestSetComponent(t *testing.T) {
	var e Entity
	alice := "alice"
	require.NoError(t, e.SetComponent(TypeUser, &alice))
	require.NoError(t, e.SetComponent(TypeClientID, nil))
	require.Equal(t, Entity{User: named("alice"), ClientID: dflt}, e)
	require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(e.SetComponent(TypeUser, nil)), "a type twice")
	require.Equal(t, kafkaerr.InvalidRequest, kafkaerr.CodeOf(e.SetComponent("group", nil)), "an unknown type")
	var types []string
	e.EachComponent(func(typ string, _ Component) { types = append(types, typ) })
	require.Equal(t, []string{TypeUser, TypeClientID}, types)
}

func TestCompareEntities(t *testing.T) {
	ordered := []Entity{
		{ClientID: named("a")},
		{User: dflt},
		{User: dflt, ClientID: dflt},
		{User: dflt, ClientID: named("a")},
		{User: named("a")},
		{User: named("b")},
	}
	for i := range ordered {
		for j := range ordered {
			got := CompareEntities(ordered[i], ordered[j])
			switch {
			case i < j:
				require.Negative(t, got, "%d %d", i, j)
			case i > j:
				require.Positive(t, got, "%d %d", i, j)
			default:
				require.Zero(t, got)
			}
		}
	}
}

func TestFilter(t *testing.T) {
	entities := map[string]Entity{
		"alice":        {User: named("alice")},
		"user-default": {User: dflt},
		"alice/app":    {User: named("alice"), ClientID: named("app")},
		"alice/dflt":   {User: named("alice"), ClientID: dflt},
		"app":          {ClientID: named("app")},
		"ip":           {IP: named("10.0.0.1")},
		"ip-default":   {IP: dflt},
	}
	for _, c := range []struct {
		name string
		f    Filter
		want []string
	}{
		{"everything", Filter{}, []string{"alice", "user-default", "alice/app", "alice/dflt", "app", "ip", "ip-default"}},
		{"nothing strict", Filter{Strict: true}, nil},
		{"exact user", Filter{Components: []FilterComponent{{Type: TypeUser, Name: "alice"}}}, []string{"alice", "alice/app", "alice/dflt"}},
		{"exact user strict", Filter{Components: []FilterComponent{{Type: TypeUser, Name: "alice"}}, Strict: true}, []string{"alice"}},
		{"default user", Filter{Components: []FilterComponent{{Type: TypeUser, Match: MatchDefault}}}, []string{"user-default"}},
		{"any user", Filter{Components: []FilterComponent{{Type: TypeUser, Match: MatchAny}}}, []string{"alice", "user-default", "alice/app", "alice/dflt"}},
		{"any client strict", Filter{Components: []FilterComponent{{Type: TypeClientID, Match: MatchAny}}, Strict: true}, []string{"app"}},
		{"user and default client", Filter{Components: []FilterComponent{{Type: TypeUser, Name: "alice"}, {Type: TypeClientID, Match: MatchDefault}}}, []string{"alice/dflt"}},
		{"exact ip", Filter{Components: []FilterComponent{{Type: TypeIP, Name: "10.0.0.1"}}}, []string{"ip"}},
		{"any ip", Filter{Components: []FilterComponent{{Type: TypeIP, Match: MatchAny}}}, []string{"ip", "ip-default"}},
		{"exact empty name", Filter{Components: []FilterComponent{{Type: TypeUser}}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, c.f.Validate())
			var got []string
			for _, name := range []string{"alice", "user-default", "alice/app", "alice/dflt", "app", "ip", "ip-default"} {
				if c.f.Matches(entities[name]) {
					got = append(got, name)
				}
			}
			require.Equal(t, c.want, got)
		})
	}
	for _, c := range []struct {
		f    Filter
		code kafkaerr.Code
	}{
		{Filter{Components: []FilterComponent{{Type: ""}}}, kafkaerr.InvalidRequest},
		{Filter{Components: []FilterComponent{{Type: TypeUser}, {Type: TypeUser, Match: MatchAny}}}, kafkaerr.InvalidRequest},
		{Filter{Components: []FilterComponent{{Type: "group"}}}, kafkaerr.UnsupportedVersion},
		{Filter{Components: []FilterComponent{{Type: TypeUser, Match: 3}}}, kafkaerr.InvalidRequest},
		{Filter{Components: []FilterComponent{{Type: TypeIP, Match: MatchAny}, {Type: TypeClientID, Match: MatchAny}}}, kafkaerr.InvalidRequest},
	} {
		require.Equal(t, c.code, kafkaerr.CodeOf(c.f.Validate()), "%+v", c.f)
	}
}

// stdIP is net/netip's answer, the reference IsIPAddress follows (zones
// aside).
func stdIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil && !strings.Contains(s, "%")
}

// TestIsIPAddress: IsIPAddress agrees with net/netip on examples and on
// random strings of the characters addresses are made of.
func TestIsIPAddress(t *testing.T) {
	for _, s := range []string{
		"0.0.0.0", "255.255.255.255", "10.0.0.1", "256.0.0.1", "01.2.3.4", "1.2.3", "1.2.3.4.5", "1..2.3", "1.2.3.4.", "",
		"::", "::1", "1::", "fe80::1", "2001:db8::8a2e:370:7334", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7::",
		"1:2:3:4:5:6:7:8::", "::ffff:1.2.3.4", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:7:1.2.3.4", ":::", "1:::2", "12345::", "::g",
		"ABCD:EF01::", "1:", ":1", "1.2.3.4::", "::1.2.3", "fe80::1%eth0", "localhost",
	} {
		require.Equal(t, stdIP(s), IsIPAddress(s), "%q", s)
	}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789abcdefABCDEFg:.%"
	for range 200_000 {
		b := make([]byte, r.IntN(24))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		s := string(b)
		require.Equal(t, stdIP(s), IsIPAddress(s), "%q", s)
	}
}

// FuzzIsIPAddress: IsIPAddress agrees with net/netip (zones aside).
func FuzzIsIPAddress(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "::1", "::ffff:1.2.3.4", "1:2:3:4:5:6:7:8", "01.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if stdIP(s) != IsIPAddress(s) {
			t.Fatalf("%q: netip says %v, IsIPAddress %v", s, stdIP(s), IsIPAddress(s))
		}
	})
}
