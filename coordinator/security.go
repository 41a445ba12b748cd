package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/diskless-go/diskless/coordinator/store"

	"github.com/diskless-go/diskless/coordinator/state"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/scram"
)

// Security: the SCRAM credentials (scram.go) and ACLs (acls.go) of the
// cluster, held by shard 0. Changes go to shard 0's leader (forwarded in
// a cluster, as the admin calls are). Reads come from the state
// published when shard 0's entries are applied: in this process if it
// leads shard 0, else from this broker's follower of shard 0 (it tails
// the log: a change made anywhere is seen here as soon as the follower
// applies its entry, well within a second), else from shard 0's leader
// by a forwarded call. A broker that made a change through the leader
// reads it at once: its follower is waited for (up to
// securityFollowerWait) until it has applied what the leader answered.
//
// The state's Version counts the security records applied to shard 0
// (the view's securityVersion, kept in the database's meta table and so
// in snapshots): every replica of shard 0 has the same Version for the
// same state, and it grows with every change, so a poller that passes
// the Version it has gets no lists until something changed.

// securityFollowerWait bounds how long a read of the security state
// waits for this broker's follower of shard 0 to apply a change this
// broker made, before it asks the leader instead.
const securityFollowerWait = 500 * time.Millisecond

// securityLeader returns shard 0's leader if it is in this process; nil
// and no error in a cluster where another broker leads it.
func (c *Coordinator) securityLeader() (*leader, error) {
	sh, err := c.localShard(0)
	switch {
	case err == nil:
		return sh, nil
	case !errors.Is(err, errNotServed):
		return nil, err
	case c.remotes != nil:
		return nil, nil
	}
	return nil, errShardDown(0)
}

// securitySnapshot returns the security state to read here: shard 0's
// leader's in this process, else this broker's follower's; nil (and no
// error) leaves the read to shard 0's leader elsewhere.
func (c *Coordinator) securitySnapshot(ctx context.Context) (*store.SecuritySnapshot, error) {
	pub, err := c.catalogPub(ctx)
	if pub == nil || err != nil {
		return nil, err
	}
	return pub.Security.Load(), nil
}

// catalogPub returns the published state of shard 0 to read the
// cluster's catalog (security, client quotas) from: shard 0's leader's in
// this process, else this broker's follower's, once it has applied what
// this broker changed; nil (and no error) leaves the read to shard 0's
// leader elsewhere.
func (c *Coordinator) catalogPub(ctx context.Context) (*store.Published, error) {
	l, err := c.securityLeader()
	switch {
	case err != nil:
		return nil, err
	case l != nil:
		return l.pub, nil
	}
	_, f := c.follower(0)
	if f == nil {
		return nil, nil
	}
	if context.Cause(f.lost) != nil {
		c.reopenFollower(0) // it cannot catch up: open it again, meanwhile ask the leader
		return nil, nil
	}
	wctx, cancel := context.WithTimeout(ctx, securityFollowerWait)
	err = f.WaitApplied(wctx, c.securityAcked.Load())
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			c.reopenFollower(0)
		}
		return nil, nil
	}
	return f.c.pub, nil
}

// ackSecurity records that shard 0's leader answered a security (or
// client quota) change of this broker having applied its log up to applied: this broker's
// follower of shard 0 is read only once it has applied as much. (Not the
// follower's acked of commits: a security read need not wait for data.)
func (c *Coordinator) ackSecurity(applied int64) {
	for {
		old := c.securityAcked.Load()
		if applied <= old || c.securityAcked.CompareAndSwap(old, applied) {
			return
		}
	}
}

// AlterScramCredentials creates or replaces (upserts) and deletes SCRAM
// credentials, in shard 0 (forwarded to its leader in a cluster). It
// returns one error per item, upserts first, then deletions, nil for
// those done, with the codes Kafka's AlterUserScramCredentials answers:
// UNSUPPORTED_SASL_MECHANISM for an unknown mechanism,
// UNACCEPTABLE_CREDENTIAL for an empty user name, iterations outside
// scram.MinIterations to scram.MaxIterations or a credential without a
// salt or keys, RESOURCE_NOT_FOUND for the deletion of a credential that
// does not exist, DUPLICATE_RESOURCE when the request changes one user
// twice (by user, whatever the mechanisms, as Kafka). As in Kafka, an
// error is a user's: every item of that user answers it and none of them
// is made; the other users' changes are. The error return is for the
// call as a whole (nothing was decided, or it is not known what was).
func (c *Coordinator) AlterScramCredentials(ctx context.Context, upserts []scram.Credential, deletions []ScramDeletion) ([]error, error) {
	sh, err := c.securityLeader()
	if err != nil {
		return nil, err
	}
	if sh == nil {
		a, err := remoteCall[itemErrors](ctx, c.remotes[0], fwAdminScram, scramCall{Upserts: upserts, Deletions: deletions})
		if err != nil {
			return nil, err
		}
		c.ackSecurity(a.Applied)
		return a.errors(), nil
	}
	return sh.AlterScramCredentials(ctx, upserts, deletions)
}

// CreateACLs creates ACL bindings in shard 0 (forwarded to its leader in
// a cluster). It returns one error per binding, nil for those created or
// already there (a binding that exists is not created again, as Kafka
// accepts it silently); a binding that is not valid is INVALID_REQUEST
// (see acl.Binding.Validate) and changes nothing.
func (c *Coordinator) CreateACLs(ctx context.Context, bindings []acl.Binding) ([]error, error) {
	sh, err := c.securityLeader()
	if err != nil {
		return nil, err
	}
	if sh == nil {
		a, err := remoteCall[itemErrors](ctx, c.remotes[0], fwAdminCreateACLs, bindings)
		if err != nil {
			return nil, err
		}
		c.ackSecurity(a.Applied)
		return a.errors(), nil
	}
	return sh.CreateACLs(ctx, bindings)
}

// DeleteACLs deletes the ACL bindings that the filters match, in shard 0
// (forwarded to its leader in a cluster), and returns, for each filter,
// the bindings it matched, which are deleted (a binding two filters
// match is in both answers; none: nil). A filter matches as Kafka's
// AclBindingFilter.matches: one with UNKNOWN values matches nothing.
func (c *Coordinator) DeleteACLs(ctx context.Context, filters []acl.Filter) ([][]acl.Binding, error) {
	sh, err := c.securityLeader()
	if err != nil {
		return nil, err
	}
	if sh == nil {
		a, err := remoteCall[aclsDeleted](ctx, c.remotes[0], fwAdminDeleteACLs, filters)
		if err != nil {
			return nil, err
		}
		c.ackSecurity(a.Applied)
		out := make([][]acl.Binding, len(filters))
		copy(out, a.Deleted)
		return out, nil
	}
	return sh.DeleteACLs(ctx, filters)
}

// Security returns the SCRAM credentials and ACLs with their Version;
// when since is that Version, only the Version (Changed false): a cheap
// call to poll. since -1 always gets the lists. In a cluster, a broker
// that does not lead shard 0 answers from its follower of shard 0
// (Options.FollowerLog), else by a forwarded call to the leader; a
// change made on any broker is seen as soon as the follower applied it
// (its log's Wait: within a second), and one this broker made, at once.
func (c *Coordinator) Security(ctx context.Context, since int64) (SecurityState, error) {
	snap, err := c.securitySnapshot(ctx)
	if err != nil {
		return SecurityState{}, err
	}
	if snap == nil {
		st, err := remoteCall[SecurityState](ctx, c.remotes[0], fwSecurity, since)
		if st.Changed && st.ACLs == nil { // gob sends an empty list as none
			st.ACLs = []acl.Binding{}
		}
		if st.Changed && st.Credentials == nil {
			st.Credentials = []scram.Credential{}
		}
		return st, err
	}
	return snap.State(since), nil
}

// ScramCredential returns user's SCRAM credential for mechanism m, read
// as Security reads; false if there is none.
func (c *Coordinator) ScramCredential(ctx context.Context, user string, m scram.Mechanism) (scram.Credential, bool, error) {
	snap, err := c.securitySnapshot(ctx)
	if err != nil {
		return scram.Credential{}, false, err
	}
	if snap == nil {
		a, err := remoteCall[scramFound](ctx, c.remotes[0], fwScramCredential, state.ScramKey{User: user, Mechanism: m})
		return a.Cred, a.Found, err
	}
	sh, ok := snap.Credential(user, m)
	return sh, ok, nil
}

// The forwarded security calls' bodies and answers.
type (
	// scramCall is the request of a forwarded AlterScramCredentials.
	scramCall struct {
		Upserts   []scram.Credential
		Deletions []ScramDeletion
	}
	// itemErrors are one error per item (Failed[i] says Errs[i] is one:
	// gob sends no nil in a list), and the leader's applied log position
	// once it answered.
	itemErrors struct {
		Failed  []bool
		Errs    []wireErr
		Applied int64
	}
	// aclsDeleted is the answer of a forwarded DeleteACLs.
	aclsDeleted struct {
		Deleted [][]acl.Binding
		Applied int64
	}
	// scramFound is the answer of a forwarded ScramCredential.
	scramFound struct {
		Cred  scram.Credential
		Found bool
	}
)

func toItemErrors(errs []error, applied int64) itemErrors {
	a := itemErrors{Failed: make([]bool, len(errs)), Errs: make([]wireErr, len(errs)), Applied: applied}
	for i, e := range errs {
		if e != nil {
			a.Failed[i], a.Errs[i] = true, *toWire(e)
		}
	}
	return a
}

func (a itemErrors) errors() []error {
	out := make([]error, len(a.Failed))
	for i, failed := range a.Failed {
		if failed && i < len(a.Errs) {
			out[i] = a.Errs[i].err()
		}
	}
	return out
}

// The forwarded security calls, served on shard 0's leader (see
// serveFuncs).
var (
	serveScram = served(func(ctx context.Context, _ *Coordinator, c *leader, req scramCall) (itemErrors, error) {
		errs, err := c.AlterScramCredentials(ctx, req.Upserts, req.Deletions)
		return toItemErrors(errs, c.applied.Load()), err
	})
	serveCreateACLs = served(func(ctx context.Context, _ *Coordinator, c *leader, bindings []acl.Binding) (itemErrors, error) {
		errs, err := c.CreateACLs(ctx, bindings)
		return toItemErrors(errs, c.applied.Load()), err
	})
	serveDeleteACLs = served(func(ctx context.Context, _ *Coordinator, c *leader, filters []acl.Filter) (aclsDeleted, error) {
		out, err := c.DeleteACLs(ctx, filters)
		return aclsDeleted{Deleted: out, Applied: c.applied.Load()}, err
	})
	serveSecurity = served(func(_ context.Context, _ *Coordinator, c *leader, since int64) (SecurityState, error) {
		return c.pub.Security.Load().State(since), nil
	})
	serveScramCredential = served(func(_ context.Context, _ *Coordinator, c *leader, k state.ScramKey) (scramFound, error) {
		cred, ok := c.pub.Security.Load().Credential(k.User, k.Mechanism)
		return scramFound{Cred: cred, Found: ok}, nil
	})
)
