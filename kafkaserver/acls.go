package kafkaserver

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-go/diskless"
	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/scram"
)

// The security admin APIs: ACLs (CreateAcls, DescribeAcls, DeleteAcls;
// SECURITY_DISABLED unless Config.ACL turns the built-in authorizer on)
// and SCRAM credentials (DescribeUserScramCredentials,
// AlterUserScramCredentials, KIP-554). Both are kept by the Broker as
// coordinator records, so every node of a cluster sees them.

// createACLs answers CreateAcls: ALTER on the cluster, then each binding
// validated (INVALID_REQUEST) and stored.
func (s *Server) createACLs(ctx context.Context, req *kmsg.CreateACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
	}
	fail := func(i int, code int16, msg string) {
		resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, kmsg.StringPtr(msg)
	}
	if code, msg := s.aclsRefused(ctx, acl.OpAlter); code != 0 {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
		}
		return resp
	}
	bindings := make([]acl.Binding, len(req.Creations))
	for i, c := range req.Creations {
		bindings[i] = acl.Binding{
			ResourceType: acl.ResourceType(c.ResourceType), ResourceName: c.ResourceName, PatternType: acl.PatternType(c.ResourcePatternType),
			Principal: c.Principal, Host: c.Host, Operation: acl.Operation(c.Operation), Permission: acl.Permission(c.PermissionType),
		}
		if req.Version == 0 {
			bindings[i].PatternType = acl.PatternLiteral
		}
	}
	bindings, at := validItems(bindings, func(i int, err error) { fail(i, int16(kafkaerr.CodeOf(err)), err.Error()) })
	if len(bindings) == 0 {
		return resp
	}
	errs, err := s.b.CreateACLs(ctx, bindings)
	for j, i := range at {
		e := err
		if e == nil && j < len(errs) {
			e = errs[j]
		}
		if e != nil {
			fail(i, codeOf(e), e.Error())
		}
	}
	if err == nil {
		s.acls.refresh(ctx) // this node decides with them at once
	}
	return resp
}

// aclsRefused is the error code and message an ACL request answers
// (each of its results) when the broker keeps no ACLs or the principal may
// not do op on the cluster; code is 0 when neither.
func (s *Server) aclsRefused(ctx context.Context, op acl.Operation) (code int16, msg *string) {
	switch {
	case s.acls == nil:
		return int16(kafkaerr.SecurityDisabled), kmsg.StringPtr(errSecurityDisabled.Error())
	case !s.allowCluster(ctx, op):
		return int16(kafkaerr.ClusterAuthorizationFailed), nil
	}
	return 0, nil
}

// validItems returns the items that pass Validate and their indexes in
// items; fail is called with the index and error of each other.
func validItems[T interface{ Validate() error }](items []T, fail func(i int, err error)) (valid []T, at []int) {
	for i, it := range items {
		if err := it.Validate(); err != nil {
			fail(i, err)
			continue
		}
		valid, at = append(valid, it), append(at, i)
	}
	return valid, at
}

// filterOf returns the acl.Filter of a DescribeAcls or DeleteAcls filter;
// version 0 has no pattern type, and means LITERAL.
func filterOf(version int16, rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) acl.Filter {
	f := acl.Filter{
		ResourceType: acl.ResourceType(rt), ResourceName: name, PatternType: acl.PatternType(pt),
		Principal: principal, Host: host, Operation: acl.Operation(op), Permission: acl.Permission(perm),
	}
	if version == 0 {
		f.PatternType = acl.PatternLiteral
	}
	return f
}

// describeACLs answers DescribeAcls: DESCRIBE on the cluster, then the
// bindings the filter matches, grouped by resource pattern.
func (s *Server) describeACLs(ctx context.Context, req *kmsg.DescribeACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if code, msg := s.aclsRefused(ctx, acl.OpDescribe); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp
	}
	f := filterOf(req.Version, req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType)
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = int16(kafkaerr.CodeOf(err)), kmsg.StringPtr(err.Error())
		return resp
	}
	st, err := s.b.Security(ctx, -1)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = codeOf(err), kmsg.StringPtr(err.Error())
		return resp
	}
	type pattern struct {
		rt   acl.ResourceType
		name string
		pt   acl.PatternType
	}
	at := map[pattern]int{}
	for _, b := range st.ACLs {
		if !f.Matches(b) {
			continue
		}
		p := pattern{b.ResourceType, b.ResourceName, b.PatternType}
		i, ok := at[p]
		if !ok {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = kmsg.ACLResourceType(p.rt), p.name, kmsg.ACLResourcePatternType(p.pt)
			i = len(resp.Resources)
			at[p] = i
			resp.Resources = append(resp.Resources, r)
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
	}
	return resp
}

// deleteACLs answers DeleteAcls: ALTER on the cluster, then for each
// filter the bindings it deleted.
func (s *Server) deleteACLs(ctx context.Context, req *kmsg.DeleteACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	if code, msg := s.aclsRefused(ctx, acl.OpAlter); code != 0 {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
		}
		return resp
	}
	filters := make([]acl.Filter, len(req.Filters))
	for i, rf := range req.Filters {
		filters[i] = filterOf(req.Version, rf.ResourceType, rf.ResourceName, rf.ResourcePatternType, rf.Principal, rf.Host, rf.Operation, rf.PermissionType)
	}
	filters, at := validItems(filters, func(i int, err error) {
		resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = int16(kafkaerr.CodeOf(err)), kmsg.StringPtr(err.Error())
	})
	if len(filters) == 0 {
		return resp
	}
	deleted, err := s.b.DeleteACLs(ctx, filters)
	for j, i := range at {
		if err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = codeOf(err), kmsg.StringPtr(err.Error())
			continue
		}
		if j >= len(deleted) {
			continue
		}
		for _, b := range deleted[j] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(b.ResourceType), b.ResourceName, kmsg.ACLResourcePatternType(b.PatternType)
			m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
		}
	}
	if err == nil {
		s.acls.refresh(ctx)
	}
	return resp
}

// describeUserSCRAMCredentials answers DescribeUserScramCredentials:
// DESCRIBE on the cluster, then each user's mechanisms and iterations
// (never a key): every user with a credential when the list is null; a
// user named twice DUPLICATE_RESOURCE, one without a credential
// RESOURCE_NOT_FOUND.
func (s *Server) describeUserSCRAMCredentials(ctx context.Context, req *kmsg.DescribeUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !s.allowCluster(ctx, acl.OpDescribe) {
		resp.ErrorCode = int16(kafkaerr.ClusterAuthorizationFailed)
		return resp
	}
	st, err := s.b.Security(ctx, -1)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = codeOf(err), kmsg.StringPtr(err.Error())
		return resp
	}
	byUser := map[string][]scram.Credential{}
	var users []string
	for _, c := range st.Credentials {
		if _, ok := byUser[c.User]; !ok {
			users = append(users, c.User)
		}
		byUser[c.User] = append(byUser[c.User], c)
	}
	result := func(user string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = user
		for _, c := range byUser[user] {
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism, ci.Iterations = int8(c.Mechanism), c.Iterations
			r.CredentialInfos = append(r.CredentialInfos, ci)
		}
		return r
	}
	if len(req.Users) == 0 { // null or empty: every user, as Kafka answers
		for _, u := range users {
			resp.Results = append(resp.Results, result(u))
		}
		return resp
	}
	named := nameCounts(req.Users, func(u kmsg.DescribeUserSCRAMCredentialsRequestUser) string { return u.Name })
	answered := map[string]bool{}
	for _, u := range req.Users {
		if answered[u.Name] {
			continue
		}
		answered[u.Name] = true
		r := result(u.Name)
		switch {
		case named[u.Name] > 1:
			r.CredentialInfos = nil
			r.ErrorCode, r.ErrorMessage = int16(kafkaerr.DuplicateResource), kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: "+u.Name)
		case len(byUser[u.Name]) == 0:
			r.ErrorCode, r.ErrorMessage = int16(kafkaerr.ResourceNotFound), kmsg.StringPtr("Attempt to describe a user credential that does not exist: "+u.Name)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// alterUserSCRAMCredentials answers AlterUserScramCredentials: ALTER on
// the cluster, then, user by user (one result each), the deletions and
// upsertions, decided by the Broker as Kafka's controller decides them
// (an empty name or iterations out of bounds: UNACCEPTABLE_CREDENTIAL; an
// unknown mechanism: UNSUPPORTED_SASL_MECHANISM; a user named twice in
// the request: DUPLICATE_RESOURCE; deleting what does not exist:
// RESOURCE_NOT_FOUND); a user with an error has none of its changes
// made. The client salts the password (KIP-554): the broker derives and
// keeps StoredKey and ServerKey.
func (s *Server) alterUserSCRAMCredentials(ctx context.Context, req *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var users []string
	failed := map[string]error{}
	note := func(user string) {
		if _, ok := failed[user]; !ok {
			users = append(users, user)
			failed[user] = nil
		}
	}
	var owners []string // the user of each item: upserts, then deletions
	var upserts []scram.Credential
	for _, u := range req.Upsertions {
		note(u.Name)
		owners = append(owners, u.Name)
		upserts = append(upserts, credentialOf(u))
	}
	var dels []diskless.ScramDeletion
	for _, d := range req.Deletions {
		note(d.Name)
		owners = append(owners, d.Name)
		dels = append(dels, diskless.ScramDeletion{User: d.Name, Mechanism: scram.Mechanism(d.Mechanism)})
	}
	if !s.allowCluster(ctx, acl.OpAlter) {
		for _, u := range users {
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode = u, int16(kafkaerr.ClusterAuthorizationFailed)
			resp.Results = append(resp.Results, r)
		}
		return resp
	}
	if len(owners) > 0 {
		errs, err := s.b.AlterScramCredentials(ctx, upserts, dels)
		for i, user := range owners {
			e := err
			if e == nil && i < len(errs) {
				e = errs[i]
			}
			if e != nil && failed[user] == nil {
				failed[user] = e
			}
		}
	}
	for _, u := range users {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = u
		if err := failed[u]; err != nil {
			r.ErrorCode, r.ErrorMessage = codeOf(err), kmsg.StringPtr(err.Error())
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// credentialOf is the credential an upsertion asks for: its keys derived
// from the salted password when there is one and the mechanism is known;
// the Broker validates the rest (and refuses a credential without keys).
func credentialOf(u kmsg.AlterUserSCRAMCredentialsRequestUpsertion) scram.Credential {
	c := scram.Credential{User: u.Name, Mechanism: scram.Mechanism(u.Mechanism), Salt: u.Salt, Iterations: u.Iterations}
	if !c.Mechanism.Valid() || len(u.Salt) == 0 || len(u.SaltedPassword) == 0 {
		return c
	}
	// The keys do not depend on the iterations: derive them whatever
	// the request says, and let the Broker judge the count.
	d, err := scram.FromSaltedPassword(u.Name, c.Mechanism, u.Salt, u.SaltedPassword, scram.MinIterations)
	if err != nil {
		return c
	}
	d.Iterations = u.Iterations
	return d
}
