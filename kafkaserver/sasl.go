package kafkaserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/diskless-go/diskless/scram"
)

// The SASL mechanisms built in.
const (
	mechPlain       = "PLAIN"
	mechSCRAM256    = "SCRAM-SHA-256"
	mechSCRAM512    = "SCRAM-SHA-512"
	mechOAuthBearer = "OAUTHBEARER"
)

// builtinAuthenticator is the Authenticator of the built-in mechanisms:
// PLAIN and SCRAM over a CredentialStore, OAUTHBEARER over a validator.
type builtinAuthenticator struct {
	mechanisms []string
	store      CredentialStore
	oauth      OAuthBearerValidator
	// decoy is the credential PLAIN checks the password of an unknown
	// user against, and fakeKey derives the salts SCRAM tells for
	// unknown users: neither the time taken nor the exchange tells
	// whether a user exists.
	decoy   scram.Credential
	fakeKey []byte
}

var (
	_ Authenticator = (*builtinAuthenticator)(nil)
	_ Exchange      = (*plainExchange)(nil)
	_ Exchange      = (*scramExchange)(nil)
	_ Exchange      = (*oauthExchange)(nil)
	_ Exchange      = failingExchange{}
)

func newBuiltinAuthenticator(mechanisms []string, store CredentialStore, oauth OAuthBearerValidator) *builtinAuthenticator {
	b := &builtinAuthenticator{mechanisms: mechanisms, store: store, oauth: oauth, fakeKey: make([]byte, 32)}
	rand.Read(b.fakeKey)
	decoyPassword := make([]byte, 16)
	rand.Read(decoyPassword)
	var err error
	if b.decoy, err = scram.New("", scram.SHA512, fmt.Sprintf("%x", decoyPassword), 0); err != nil {
		panic(err) // a valid mechanism and a password: it cannot fail
	}
	return b
}

func (b *builtinAuthenticator) Mechanisms() []string { return slices.Clone(b.mechanisms) }

func (b *builtinAuthenticator) Start(_ context.Context, mechanism string, _ ClientInfo) (Exchange, error) {
	switch mechanism {
	case mechPlain:
		return &plainExchange{b: b}, nil
	case mechSCRAM256:
		return newSCRAMExchange(b, scram.SHA256), nil
	case mechSCRAM512:
		return newSCRAMExchange(b, scram.SHA512), nil
	case mechOAuthBearer:
		return &oauthExchange{validate: b.oauth}, nil
	}
	return nil, fmt.Errorf("no SASL mechanism %q", mechanism)
}

// plainExchange is SASL/PLAIN (RFC 4616): one message, the password
// checked against the user's SCRAM credential.
type plainExchange struct{ b *builtinAuthenticator }

// plainFailed is PLAIN's message to the client, Kafka's.
const plainFailed = "Authentication failed: Invalid username or password"

func (p *plainExchange) Step(ctx context.Context, token []byte) (StepResult, error) {
	authzid, user, password, err := parsePlain(token)
	if err != nil {
		return StepResult{}, &AuthenticationError{Message: "Authentication failed: invalid SASL/PLAIN message", Err: err}
	}
	if authzid != "" && authzid != user {
		return StepResult{}, &AuthenticationError{User: user, Message: "Authentication failed: Client requested an authorization id that is different from username"}
	}
	cred, found, err := p.b.credential(ctx, user, scram.SHA512)
	if err == nil && !found {
		cred, found, err = p.b.credential(ctx, user, scram.SHA256)
	}
	if err != nil {
		return StepResult{}, &lookupError{user: user, err: err}
	}
	if !found {
		p.b.decoy.Check(password) // as long as a known user's check
		return StepResult{}, &AuthenticationError{User: user, Message: plainFailed, Err: errors.New("unknown user")}
	}
	if !cred.Check(password) {
		return StepResult{}, &AuthenticationError{User: user, Message: plainFailed, Err: errors.New("wrong password")}
	}
	return StepResult{Response: []byte{}, Done: true, User: user}, nil
}

// credential looks up user's credential for m, checking that the store
// returned one of m for a valid iteration count.
func (b *builtinAuthenticator) credential(ctx context.Context, user string, m scram.Mechanism) (scram.Credential, bool, error) {
	cred, found, err := b.store.ScramCredential(ctx, user, m)
	if err != nil || !found {
		return scram.Credential{}, false, err
	}
	if cred.Mechanism != m || cred.Iterations < scram.MinIterations || cred.Iterations > scram.MaxIterations || len(cred.Salt) == 0 || len(cred.StoredKey) == 0 || len(cred.ServerKey) == 0 {
		return scram.Credential{}, false, fmt.Errorf("the store's %s credential of %q is not valid", m, user)
	}
	return cred, true, nil
}

// parsePlain parses a SASL/PLAIN message (RFC 4616):
// [authzid] NUL authcid NUL passwd, each UTF-8 without NUL, the user and
// the password not empty. The strings returned are copies.
func parsePlain(msg []byte) (authzid, user, password string, err error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", "", "", fmt.Errorf("%d NUL-separated fields, not 3", len(parts))
	}
	for _, p := range parts {
		if !utf8.Valid(p) {
			return "", "", "", errors.New("a field that is not UTF-8")
		}
	}
	if len(parts[1]) == 0 {
		return "", "", "", errors.New("no user name")
	}
	if len(parts[2]) == 0 {
		return "", "", "", errors.New("no password")
	}
	return string(parts[0]), string(parts[1]), string(parts[2]), nil
}
