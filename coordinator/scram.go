package coordinator

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"slices"
	"strings"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/scram"
)

// SCRAM credentials (Kafka's AlterUserScramCredentials): a user's salt,
// iteration count, StoredKey and ServerKey for one mechanism, never a
// password. They live in shard 0, the cluster-wide catalog, as records
// (scramUpsertRecord, scramDeleteRecord) that every replica of shard 0
// applies to its view and to the table scram_credentials; the Kafka
// server reads them (Coordinator.Security, Coordinator.ScramCredential)
// to authenticate SASL/SCRAM and SASL/PLAIN connections.

// ScramDeletion names a credential to delete: a user's, for one
// mechanism.
type ScramDeletion struct {
	User      string
	Mechanism scram.Mechanism
}

// scramKey names a credential in the view.
type scramKey struct {
	User      string
	Mechanism scram.Mechanism
}

// scramUpsertRecord creates or replaces a user's credential for one
// mechanism.
type scramUpsertRecord struct {
	Cred scram.Credential
}

// scramDeleteRecord deletes a user's credential for one mechanism.
type scramDeleteRecord struct {
	Key scramKey
}

func (scramUpsertRecord) kind() recordType { return recScramUpsert }
func (scramDeleteRecord) kind() recordType { return recScramDelete }

func (r scramUpsertRecord) appendTo(b []byte) []byte {
	c := r.Cred
	b = appendString(b, c.User)
	b = append(b, byte(c.Mechanism))
	b = appendBytes(b, c.Salt)
	b = binary.AppendVarint(b, int64(c.Iterations))
	b = appendBytes(b, c.StoredKey)
	return appendBytes(b, c.ServerKey)
}

func (r scramDeleteRecord) appendTo(b []byte) []byte {
	b = appendString(b, r.Key.User)
	return append(b, byte(r.Key.Mechanism))
}

// appendBytes appends a length and the bytes.
func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// mechanism reads a SCRAM mechanism: one of those Kafka knows.
func (d *decoder) mechanism() scram.Mechanism {
	m := scram.Mechanism(d.byte())
	if d.err == nil && !m.Valid() {
		d.fail("unknown SCRAM mechanism %d", m)
	}
	return m
}

// blob reads a length and that many bytes, copied, not empty.
func (d *decoder) blob(what string) []byte {
	p := d.bytes()
	if d.err == nil && len(p) == 0 {
		d.fail("an empty %s", what)
	}
	return bytes.Clone(p)
}

func (d *decoder) scramUpsert() scramUpsertRecord {
	var c scram.Credential
	c.User = d.string()
	c.Mechanism = d.mechanism()
	c.Salt = d.blob("salt")
	c.Iterations = d.int32()
	c.StoredKey = d.blob("StoredKey")
	c.ServerKey = d.blob("ServerKey")
	// The leader takes scram.MinIterations to MaxIterations; a record
	// holds at least one, whatever bounds the leader that wrote it had.
	if d.err == nil && (c.User == "" || c.Iterations < 1) {
		d.fail("a SCRAM credential of user %q with %d iterations", c.User, c.Iterations)
	}
	return scramUpsertRecord{Cred: c}
}

func (d *decoder) scramDelete() scramDeleteRecord {
	r := scramDeleteRecord{Key: scramKey{User: d.string(), Mechanism: d.mechanism()}}
	if d.err == nil && r.Key.User == "" {
		d.fail("a SCRAM deletion of no user")
	}
	return r
}

// credential returns the credential of k, nil if there is none.
func (v *view) credential(k scramKey) *scram.Credential {
	for ; v != nil; v = v.parent {
		if c, ok := v.creds[k]; ok {
			return c
		}
	}
	return nil
}

// applyScram applies a SCRAM record to the view.
func (v *view) applyScram(r record) {
	switch r := r.(type) {
	case scramUpsertRecord:
		c := r.Cred
		v.creds[scramKey{c.User, c.Mechanism}] = &c
	case scramDeleteRecord:
		if v.parent == nil {
			delete(v.creds, r.Key)
		} else {
			v.creds[r.Key] = nil
		}
	}
	v.securityVersion++
}

// eachCredential calls f with every credential of v (the newest of each,
// from v or a parent), in no order.
func (v *view) eachCredential(f func(c *scram.Credential)) {
	seen := map[scramKey]bool{}
	for w := v; w != nil; w = w.parent {
		for k := range w.creds {
			if !seen[k] {
				seen[k] = true
				if c := v.credential(k); c != nil {
					f(c)
				}
			}
		}
	}
}

// compareCredentials orders credentials by user, then mechanism.
func compareCredentials(a, b scram.Credential) int {
	return cmp.Or(strings.Compare(a.User, b.User), cmp.Compare(a.Mechanism, b.Mechanism))
}

// cloneCredential returns c with slices of its own.
func cloneCredential(c scram.Credential) scram.Credential {
	c.Salt, c.StoredKey, c.ServerKey = bytes.Clone(c.Salt), bytes.Clone(c.StoredKey), bytes.Clone(c.ServerKey)
	return c
}

// scramOp decides AlterScramCredentials: errs are the answers, upserts
// first, then deletions.
type scramOp struct {
	baseOp
	upserts   []scram.Credential
	deletions []ScramDeletion
	errs      []error
}

func (o *scramOp) coords() int { return max(len(o.upserts)+len(o.deletions), 1) }

// check decides as Kafka's ScramControlManager.alterCredentials does, by
// user: the deletions first, then the upserts, in order; a user's second
// change in the request is DUPLICATE_RESOURCE, and once a user has an
// error, every change of that user answers it and none is made. The
// users without an error get their records.
func (o *scramOp) check(g *group) {
	userErr := map[string]error{}
	deleted := map[string]int{}  // user -> index in deletions
	upserted := map[string]int{} // user -> index in upserts
	duplicate := func() error {
		return kafkaerr.New(kafkaerr.DuplicateResource, "a user credential cannot be altered twice in the same request")
	}
	for i, x := range o.deletions {
		if _, ok := userErr[x.User]; ok {
			continue
		}
		if _, ok := deleted[x.User]; ok {
			delete(deleted, x.User)
			userErr[x.User] = duplicate()
			continue
		}
		if err := checkScramUser(x.User, x.Mechanism); err != nil {
			userErr[x.User] = err
			continue
		}
		if g.spec.credential(scramKey{x.User, x.Mechanism}) == nil {
			userErr[x.User] = kafkaerr.New(kafkaerr.ResourceNotFound, "attempt to delete a user credential that does not exist: user %q, %v", x.User, x.Mechanism)
			continue
		}
		deleted[x.User] = i
	}
	for i, c := range o.upserts {
		if _, ok := userErr[c.User]; ok {
			continue
		}
		_, del := deleted[c.User]
		_, up := upserted[c.User]
		if del || up {
			delete(deleted, c.User)
			delete(upserted, c.User)
			userErr[c.User] = duplicate()
			continue
		}
		if err := checkScramCredential(c); err != nil {
			userErr[c.User] = err
			continue
		}
		upserted[c.User] = i
	}
	o.errs = make([]error, len(o.upserts)+len(o.deletions))
	for i, c := range o.upserts {
		o.errs[i] = userErr[c.User]
	}
	for i, x := range o.deletions {
		o.errs[len(o.upserts)+i] = userErr[x.User]
	}
	// The records in request order, deletions first (as Kafka's).
	for _, i := range sortedValues(deleted) {
		x := o.deletions[i]
		g.add(scramDeleteRecord{Key: scramKey{x.User, x.Mechanism}})
	}
	for _, i := range sortedValues(upserted) {
		g.add(scramUpsertRecord{Cred: cloneCredential(o.upserts[i])})
	}
}

// sortedValues returns the values of m in increasing order.
func sortedValues(m map[string]int) []int {
	out := make([]int, 0, len(m))
	for _, i := range m {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// checkScramUser returns Kafka's error for a user name and mechanism
// (ScramControlManager.validateScramUsernameAndMechanism).
func checkScramUser(user string, m scram.Mechanism) error {
	switch {
	case user == "":
		return kafkaerr.New(kafkaerr.UnacceptableCredential, "username must not be empty")
	case !m.Valid():
		return kafkaerr.New(kafkaerr.UnsupportedSaslMechanism, "unknown SCRAM mechanism %d", m)
	}
	return nil
}

// checkScramCredential returns Kafka's error for a credential to upsert
// (ScramControlManager.validateUpsertion); a credential with no salt or
// keys is UNACCEPTABLE_CREDENTIAL too (it could never authenticate).
func checkScramCredential(c scram.Credential) error {
	if err := checkScramUser(c.User, c.Mechanism); err != nil {
		return err
	}
	switch {
	case c.Iterations < scram.MinIterations:
		return kafkaerr.New(kafkaerr.UnacceptableCredential, "too few iterations: %d, at least %d", c.Iterations, scram.MinIterations)
	case c.Iterations > scram.MaxIterations:
		return kafkaerr.New(kafkaerr.UnacceptableCredential, "too many iterations: %d, at most %d", c.Iterations, scram.MaxIterations)
	case len(c.Salt) == 0 || len(c.StoredKey) == 0 || len(c.ServerKey) == 0:
		return kafkaerr.New(kafkaerr.UnacceptableCredential, "a credential needs a salt, a StoredKey and a ServerKey")
	}
	return nil
}

// AlterScramCredentials upserts and deletes SCRAM credentials of this
// shard (see Coordinator.AlterScramCredentials).
func (c *leader) AlterScramCredentials(ctx context.Context, upserts []scram.Credential, deletions []ScramDeletion) ([]error, error) {
	o := &scramOp{baseOp: newBaseOp(ctx), upserts: upserts, deletions: deletions}
	if err := c.submit(ctx, o, o.done); err != nil {
		return nil, err
	}
	return o.errs, nil
}

// The writer's statements of SCRAM records.
const (
	sqlUpsertScram = "INSERT INTO scram_credentials (user_name, mechanism, salt, iterations, stored_key, server_key) VALUES (?, ?, ?, ?, ?, ?) " +
		"ON CONFLICT (user_name, mechanism) DO UPDATE SET salt = excluded.salt, iterations = excluded.iterations, stored_key = excluded.stored_key, server_key = excluded.server_key"
	sqlDeleteScram = "DELETE FROM scram_credentials WHERE user_name = ? AND mechanism = ?"
	sqlLoadScram   = "SELECT user_name, mechanism, salt, iterations, stored_key, server_key FROM scram_credentials"
)

// writeScram writes a SCRAM record.
func (s *store) writeScram(ctx context.Context, r record) error {
	var err error
	switch r := r.(type) {
	case scramUpsertRecord:
		c := r.Cred
		_, err = s.exec(ctx, sqlUpsertScram, c.User, int64(c.Mechanism), c.Salt, int64(c.Iterations), c.StoredKey, c.ServerKey)
	case scramDeleteRecord:
		_, err = s.exec(ctx, sqlDeleteScram, r.Key.User, int64(r.Key.Mechanism))
	}
	return err
}
