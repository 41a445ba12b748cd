package kafkaserver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/acl"
)

// Authorization, as Kafka does it: every request is checked, one action a
// resource, against the principal its connection authenticated as (see
// Config.SASL and Config.TLS; "User:ANONYMOUS" without either) and the
// client's host. With no authorizer configured every request is allowed,
// as in Kafka without authorizer.class.name. A check that cannot decide
// denies.

// Authorizer decides whether a request may act on resources. An embedding
// program may give its own (an LDAP lookup, a policy service) in
// Config.Authorizer; Config.ACL turns on the built-in one, Kafka's ACLs
// stored by the Broker. It is called on the request path, once for each
// request with every resource it names, and must be safe for concurrent
// use.
type Authorizer interface {
	// Authorize returns, for each action, whether the request may do it.
	// An answer shorter than actions denies the actions it leaves out.
	Authorize(ctx context.Context, rc RequestContext, actions []Action) []bool
}

// ResourceTypeAuthorizer is an Authorizer that can also tell whether a
// request may do an operation on at least one resource of a type, as
// Kafka's authorizeByResourceType: an idempotent producer without
// IDEMPOTENT_WRITE on the cluster is allowed a producer ID if it may WRITE
// some topic. An Authorizer that is not one is asked about the cluster
// only.
type ResourceTypeAuthorizer interface {
	Authorizer
	AuthorizeByResourceType(ctx context.Context, rc RequestContext, op acl.Operation, rt acl.ResourceType) bool
}

// RequestContext is who asks, and with which request.
type RequestContext struct {
	// Principal is "User:NAME": the SASL user, the client certificate's
	// subject, or "User:ANONYMOUS".
	Principal string
	// Host is the client's IP address.
	Host     string
	ClientID string
	// APIKey and APIVersion are the request's.
	APIKey, APIVersion int16
}

// Action is one operation on one resource.
type Action struct {
	Operation    acl.Operation
	ResourceType acl.ResourceType
	// Name is the resource's: a topic's, a group's, a transactional ID,
	// or ClusterName.
	Name string
}

// ClusterName is the name of the CLUSTER resource, as Kafka names it.
const ClusterName = acl.ClusterName

// Anonymous is the principal of a connection that authenticated neither
// with SASL nor with a client certificate.
const Anonymous = "User:ANONYMOUS"

// ACLConfig turns on the authorizer of Kafka's ACLs, kept by the Broker
// (Broker.CreateACLs) so that every node of a cluster decides from the
// same ACLs; CreateAcls, DescribeAcls and DeleteAcls manage them.
type ACLConfig struct {
	// SuperUsers are allowed everything, whatever the ACLs say (Kafka's
	// super.users): principals such as "User:admin".
	SuperUsers []string
	// AllowEveryoneIfNoACLFound allows an action on a resource that no
	// ACL names (Kafka's allow.everyone.if.no.acl.found). Default false:
	// such an action is denied.
	AllowEveryoneIfNoACLFound bool
	// Refresh is how often the authorizer reads the ACLs again, for the
	// changes made on other nodes; 0 means 250 ms. A change made through
	// this server is seen at once.
	Refresh time.Duration
}

// aclAuthorizer is the built-in Authorizer: Kafka's ACLs, read from the
// Broker. It is safe for concurrent use.
type aclAuthorizer struct {
	polled // the ACLs, read by version
	b      *diskless.Broker
	a      *acl.Authorizer
}

var _ ResourceTypeAuthorizer = (*aclAuthorizer)(nil)

// newACLAuthorizer returns the ACL authorizer over b, with the ACLs b
// holds now: it fails if they cannot be read, since without them it
// could only deny.
func newACLAuthorizer(ctx context.Context, b *diskless.Broker, cfg ACLConfig, log *zap.Logger) (*aclAuthorizer, error) {
	a := &aclAuthorizer{b: b, a: acl.NewAuthorizer(acl.Options{SuperUsers: cfg.SuperUsers, AllowEveryoneIfNoACLFound: cfg.AllowEveryoneIfNoACLFound})}
	a.polled = polled{what: "the ACLs", log: log, read: func(ctx context.Context, since int64) (int64, bool, func(), error) {
		st, err := b.Security(ctx, since)
		return st.Version, st.Changed, func() { a.a.Set(canonicalHosts(st.ACLs)) }, err
	}}
	a.version.Store(-1)
	if err := a.refresh(ctx); err != nil {
		return nil, fmt.Errorf("kafkaserver: reading the ACLs: %w", err)
	}
	return a, nil
}

func (a *aclAuthorizer) Authorize(_ context.Context, rc RequestContext, actions []Action) []bool {
	out := make([]bool, len(actions))
	for i, ac := range actions {
		out[i] = a.a.Authorize(rc.Principal, rc.Host, ac.Operation, ac.ResourceType, ac.Name)
	}
	return out
}

func (a *aclAuthorizer) AuthorizeByResourceType(_ context.Context, rc RequestContext, op acl.Operation, rt acl.ResourceType) bool {
	return a.a.AuthorizeByResourceType(rc.Principal, rc.Host, op, rt)
}

// identity is who sends a request: its RequestContext, carried in the
// handlers' context.
type identity struct {
	rc RequestContext
}

type identityKey struct{}

// withIdentity returns ctx carrying id.
func withIdentity(ctx context.Context, id *identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// identityOf returns the identity ctx carries; a context without one (a
// call from inside the server) is the anonymous principal.
func identityOf(ctx context.Context) *identity {
	if id, _ := ctx.Value(identityKey{}).(*identity); id != nil {
		return id
	}
	return &identity{rc: RequestContext{Principal: Anonymous}}
}

// allowed reports whether the request of ctx may do each action; all
// true without an authorizer. A denial is counted and logged (at most
// once a second for each principal and resource type).
func (s *Server) allowed(ctx context.Context, actions ...Action) []bool {
	return s.decide(ctx, true, actions)
}

// allowQuietly is allow without the denial's count and log: for the
// checks whose denial only narrows a listing, or is followed by another
// check, as Kafka's logIfDenied = false.
func (s *Server) allowQuietly(ctx context.Context, op acl.Operation, rt acl.ResourceType, name string) bool {
	return s.decide(ctx, false, []Action{{Operation: op, ResourceType: rt, Name: name}})[0]
}

// decide asks the authorizer about actions for the request of ctx,
// counting and logging the denials if logDenied.
func (s *Server) decide(ctx context.Context, logDenied bool, actions []Action) []bool {
	out := make([]bool, len(actions))
	if s.authz == nil {
		for i := range out {
			out[i] = true
		}
		return out
	}
	id := identityOf(ctx)
	got := s.authz.Authorize(ctx, id.rc, actions)
	for i := range out {
		out[i] = i < len(got) && got[i]
		if !out[i] && logDenied {
			s.denied(id, actions[i])
		}
	}
	return out
}

// topicsAllowed returns which of the names the request of ctx may do op
// on, each distinct name asked once; denials counted and logged.
func (s *Server) topicsAllowed(ctx context.Context, op acl.Operation, names []string) map[string]bool {
	return s.topicsDecided(ctx, true, op, names)
}

// topicsAllowedQuietly is topicsAllowed without counting or logging the
// denials.
func (s *Server) topicsAllowedQuietly(ctx context.Context, op acl.Operation, names []string) map[string]bool {
	return s.topicsDecided(ctx, false, op, names)
}

func (s *Server) topicsDecided(ctx context.Context, logDenied bool, op acl.Operation, names []string) map[string]bool {
	out := make(map[string]bool, len(names))
	var actions []Action
	for _, n := range names {
		if _, ok := out[n]; ok {
			continue
		}
		out[n] = false
		actions = append(actions, Action{Operation: op, ResourceType: acl.ResourceTopic, Name: n})
	}
	for i, ok := range s.decide(ctx, logDenied, actions) {
		out[actions[i].Name] = ok
	}
	return out
}

// allow reports whether the request of ctx may do one action.
func (s *Server) allow(ctx context.Context, op acl.Operation, rt acl.ResourceType, name string) bool {
	return s.allowed(ctx, Action{Operation: op, ResourceType: rt, Name: name})[0]
}

// allowCluster reports whether the request of ctx may do op on the
// cluster.
func (s *Server) allowCluster(ctx context.Context, op acl.Operation) bool {
	return s.allow(ctx, op, acl.ResourceCluster, ClusterName)
}

// allowAnyOf reports whether the request of ctx may do op on some
// resource of type rt (see ResourceTypeAuthorizer); not logged as a
// denial, since the caller decides with other checks.
func (s *Server) allowAnyOf(ctx context.Context, op acl.Operation, rt acl.ResourceType) bool {
	if s.authz == nil {
		return true
	}
	if ra, ok := s.authz.(ResourceTypeAuthorizer); ok {
		return ra.AuthorizeByResourceType(ctx, identityOf(ctx).rc, op, rt)
	}
	return false
}

// authorizedOps is the authorized operations bit field (bit n: operation
// n, Kafka's codes) of a resource for the request of ctx: of the
// operations in all, those the authorizer allows (all without one), as
// Kafka's authorizedOperations answers DescribeGroups,
// ConsumerGroupDescribe and DescribeCluster.
func (s *Server) authorizedOps(ctx context.Context, rt acl.ResourceType, name string, all int32) int32 {
	if s.authz == nil {
		return all
	}
	var out int32
	for op := acl.Operation(0); op < 31; op++ {
		if all&(1<<op) != 0 && s.allowQuietly(ctx, op, rt, name) {
			out |= 1 << op
		}
	}
	return out
}

// denied counts a denial and logs it, at most once a second for each
// principal and resource type.
func (s *Server) denied(id *identity, a Action) {
	s.stats.denied.Add(1)
	if !s.audit.allow(id.rc.Principal+"\x00denied "+a.ResourceType.String(), s.clock.Now()) {
		return
	}
	s.log.Info("denied (logged at most once a second for each principal and resource type)",
		zap.String("principal", id.rc.Principal), zap.String("host", id.rc.Host), zap.String("client_id", id.rc.ClientID),
		zap.String("api", kmsg.NameForKey(id.rc.APIKey)), zap.Stringer("operation", a.Operation), zap.Stringer("resource_type", a.ResourceType),
		zap.String("resource", a.Name))
}

// errSecurityDisabled answers the ACL APIs when the built-in authorizer
// is off.
var errSecurityDisabled = errors.New("no authorizer is configured on the broker")

// identity returns who sends r on c.
func (c *conn) identity(r *request) *identity {
	return &identity{rc: RequestContext{Principal: c.principal(), Host: c.host, ClientID: r.clientID, APIKey: r.kreq.Key(), APIVersion: r.kreq.GetVersion()}}
}

// canonicalHost returns an IP address as Kafka names a client's host
// (Java's InetAddress.getHostAddress: IPv4 dotted, IPv6 in eight groups
// of lowercase hex without leading zeros and without "::"), so that a
// binding written either way, and a client address as Go prints it,
// compare equal; anything else (the wildcard) as it is.
func canonicalHost(host string) string {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	b := a.As16()
	var sb strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			sb.WriteByte(':')
		}
		sb.WriteString(strconv.FormatUint(uint64(b[i])<<8|uint64(b[i+1]), 16))
	}
	return sb.String()
}

// canonicalHosts returns bindings with their hosts canonical
// (canonicalHost), copying only if one changes.
func canonicalHosts(bindings []acl.Binding) []acl.Binding {
	out := bindings
	for i, b := range bindings {
		if h := canonicalHost(b.Host); h != b.Host {
			if &out[0] == &bindings[0] {
				out = slices.Clone(bindings)
			}
			out[i].Host = h
		}
	}
	return out
}
