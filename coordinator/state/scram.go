package state

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/diskless-go/diskless/kafkaerr"
	"github.com/diskless-go/diskless/scram"
)

// ScramDeletion names a credential to delete: a user's, for one
// mechanism.
type ScramDeletion struct {
	User      string
	Mechanism scram.Mechanism
}

// ScramKey names a credential in the view.
type ScramKey struct {
	User      string
	Mechanism scram.Mechanism
}

// ScramUpsertRecord creates or replaces a user's credential for one
// mechanism.
type ScramUpsertRecord struct {
	Cred scram.Credential
}

// ScramDeleteRecord deletes a user's credential for one mechanism.
type ScramDeleteRecord struct {
	Key ScramKey
}

func (ScramUpsertRecord) Kind() recordType { return recScramUpsert }

func (ScramDeleteRecord) Kind() recordType { return recScramDelete }

func (r ScramUpsertRecord) AppendTo(b []byte) []byte {
	c := r.Cred
	b = AppendString(b, c.User)
	b = append(b, byte(c.Mechanism))
	b = appendBytes(b, c.Salt)
	b = binary.AppendVarint(b, int64(c.Iterations))
	b = appendBytes(b, c.StoredKey)
	return appendBytes(b, c.ServerKey)
}

func (r ScramDeleteRecord) AppendTo(b []byte) []byte {
	b = AppendString(b, r.Key.User)
	return append(b, byte(r.Key.Mechanism))
}

// appendBytes appends a length and the bytes.
func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// mechanism reads a SCRAM mechanism: one of those Kafka knows.
func (d *Decoder) mechanism() scram.Mechanism {
	m := scram.Mechanism(d.byte())
	if d.Err == nil && !m.Valid() {
		d.Fail("unknown SCRAM mechanism %d", m)
	}
	return m
}

// blob reads a length and that many bytes, copied, not empty.
func (d *Decoder) blob(what string) []byte {
	p := d.bytes()
	if d.Err == nil && len(p) == 0 {
		d.Fail("an empty %s", what)
	}
	return bytes.Clone(p)
}

func (d *Decoder) scramUpsert() ScramUpsertRecord {
	var c scram.Credential
	c.User = d.string()
	c.Mechanism = d.mechanism()
	c.Salt = d.blob("salt")
	c.Iterations = d.Int32()
	c.StoredKey = d.blob("StoredKey")
	c.ServerKey = d.blob("ServerKey")
	// The leader takes scram.MinIterations to MaxIterations; a record
	// holds at least one, whatever bounds the leader that wrote it had.
	if d.Err == nil && (c.User == "" || c.Iterations < 1) {
		d.Fail("a SCRAM credential of user %q with %d iterations", c.User, c.Iterations)
	}
	return ScramUpsertRecord{Cred: c}
}

func (d *Decoder) scramDelete() ScramDeleteRecord {
	r := ScramDeleteRecord{Key: ScramKey{User: d.string(), Mechanism: d.mechanism()}}
	if d.Err == nil && r.Key.User == "" {
		d.Fail("a SCRAM deletion of no user")
	}
	return r
}

// credential returns the credential of k, nil if there is none.
func (v *View) credential(k ScramKey) *scram.Credential {
	for ; v != nil; v = v.Parent {
		if c, ok := v.Creds[k]; ok {
			return c
		}
	}
	return nil
}

// applyScram applies a SCRAM record to the view.
func (v *View) applyScram(r Record) {
	switch r := r.(type) {
	case ScramUpsertRecord:
		c := r.Cred
		v.Creds[ScramKey{c.User, c.Mechanism}] = &c
	case ScramDeleteRecord:
		if v.Parent == nil {
			delete(v.Creds, r.Key)
		} else {
			v.Creds[r.Key] = nil
		}
	}
	v.SecurityVersion++
}

// EachCredential calls f with every credential of v (the newest of each,
// from v or a parent), in no order.
func (v *View) EachCredential(f func(c *scram.Credential)) {
	seen := map[ScramKey]bool{}
	for w := v; w != nil; w = w.Parent {
		for k := range w.Creds {
			if !seen[k] {
				seen[k] = true
				if c := v.credential(k); c != nil {
					f(c)
				}
			}
		}
	}
}

// CloneCredential returns c with slices of its own.
func CloneCredential(c scram.Credential) scram.Credential {
	c.Salt, c.StoredKey, c.ServerKey = bytes.Clone(c.Salt), bytes.Clone(c.StoredKey), bytes.Clone(c.ServerKey)
	return c
}

// ScramOp decides AlterScramCredentials: errs are the answers, upserts
// first, then deletions.
type ScramOp struct {
	BaseOp
	Upserts   []scram.Credential
	Deletions []ScramDeletion
	Errs      []error
}

func (o *ScramOp) Coords() int { return max(len(o.Upserts)+len(o.Deletions), 1) }

// Check decides as Kafka's ScramControlManager.alterCredentials does, by
// user: the deletions first, then the upserts, in order; a user's second
// change in the request is DUPLICATE_RESOURCE, and once a user has an
// error, every change of that user answers it and none is made. The
// users without an error get their records.
func (o *ScramOp) Check(g *Group) {
	userErr := map[string]error{}
	deleted := map[string]int{}  // user -> index in deletions
	upserted := map[string]int{} // user -> index in upserts
	duplicate := func() error {
		return kafkaerr.New(kafkaerr.DuplicateResource, "a user credential cannot be altered twice in the same request")
	}
	for i, x := range o.Deletions {
		if _, ok := userErr[x.User]; ok {
			continue
		}
		if _, ok := deleted[x.User]; ok {
			delete(deleted, x.User)
			userErr[x.User] = duplicate()
			continue
		}
		if err := CheckScramUser(x.User, x.Mechanism); err != nil {
			userErr[x.User] = err
			continue
		}
		if g.Spec.credential(ScramKey{x.User, x.Mechanism}) == nil {
			userErr[x.User] = kafkaerr.New(kafkaerr.ResourceNotFound, "attempt to delete a user credential that does not exist: user %q, %v", x.User, x.Mechanism)
			continue
		}
		deleted[x.User] = i
	}
	for i, c := range o.Upserts {
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
		if err := CheckScramCredential(c); err != nil {
			userErr[c.User] = err
			continue
		}
		upserted[c.User] = i
	}
	o.Errs = make([]error, len(o.Upserts)+len(o.Deletions))
	for i, c := range o.Upserts {
		o.Errs[i] = userErr[c.User]
	}
	for i, x := range o.Deletions {
		o.Errs[len(o.Upserts)+i] = userErr[x.User]
	}
	// The records in request order, deletions first (as Kafka's).
	for _, i := range sortedValues(deleted) {
		x := o.Deletions[i]
		g.add(ScramDeleteRecord{Key: ScramKey{x.User, x.Mechanism}})
	}
	for _, i := range sortedValues(upserted) {
		g.add(ScramUpsertRecord{Cred: CloneCredential(o.Upserts[i])})
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

// CheckScramUser returns Kafka's error for a user name and mechanism
// (ScramControlManager.validateScramUsernameAndMechanism).
func CheckScramUser(user string, m scram.Mechanism) error {
	switch {
	case user == "":
		return kafkaerr.New(kafkaerr.UnacceptableCredential, "username must not be empty")
	case !m.Valid():
		return kafkaerr.New(kafkaerr.UnsupportedSaslMechanism, "unknown SCRAM mechanism %d", m)
	}
	return nil
}

// CheckScramCredential returns Kafka's error for a credential to upsert
// (ScramControlManager.validateUpsertion); a credential with no salt or
// keys is UNACCEPTABLE_CREDENTIAL too (it could never authenticate).
func CheckScramCredential(c scram.Credential) error {
	if err := CheckScramUser(c.User, c.Mechanism); err != nil {
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
