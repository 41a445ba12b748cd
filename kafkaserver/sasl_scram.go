package kafkaserver

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	xscram "github.com/xdg-go/scram"

	"github.com/diskless-go/diskless/scram"
)

// scramExchange is SCRAM-SHA-256 or SCRAM-SHA-512 (RFC 5802, RFC 7677):
// github.com/xdg-go/scram's server conversation over the user's stored
// credential. An unknown user gets a made-up salt (the same each time)
// and fails at the proof, like a wrong password.
type scramExchange struct {
	b     *builtinAuthenticator
	m     scram.Mechanism
	conv  *xscram.ServerConversation
	ctx   context.Context // the step's, for the lookup
	user  string          // the user name, once the first message is read
	err   error           // the lookup's error
	fake  bool            // the user is unknown
	steps int             // the client's messages stepped
}

func newSCRAMExchange(b *builtinAuthenticator, m scram.Mechanism) *scramExchange {
	x := &scramExchange{b: b, m: m}
	hash := xscram.SHA256
	if m == scram.SHA512 {
		hash = xscram.SHA512
	}
	srv, err := hash.NewServer(x.lookup)
	if err != nil {
		panic(err) // xdg-go/scram's NewServer does not fail
	}
	x.conv = srv.NewConversation()
	return x
}

// lookup is the conversation's credential lookup. The salt is the raw
// bytes the scram package stores (xdg-go/scram's KeyFactors.Salt holds
// them as a string, and base64-encodes them into its message).
func (x *scramExchange) lookup(name string) (xscram.StoredCredentials, error) {
	user, err := decodeSCRAMName(name)
	if err != nil {
		return xscram.StoredCredentials{}, err
	}
	x.user = user
	cred, found, err := x.b.credential(x.ctx, user, x.m)
	if err != nil {
		x.err = err
		return xscram.StoredCredentials{}, err
	}
	if !found {
		x.fake = true
		return x.b.fakeCredential(user, x.m), nil
	}
	return xscram.StoredCredentials{
		KeyFactors: xscram.KeyFactors{Salt: string(cred.Salt), Iters: int(cred.Iterations)},
		StoredKey:  cred.StoredKey, ServerKey: cred.ServerKey,
	}, nil
}

// fakeCredential is an unknown user's: a salt derived from the user
// name (so that asking twice gives the same one) and keys no password
// gives.
func (b *builtinAuthenticator) fakeCredential(user string, m scram.Mechanism) xscram.StoredCredentials {
	mac := hmac.New(sha256.New, b.fakeKey)
	fmt.Fprintf(mac, "%d\x00%s", m, user)
	salt := mac.Sum(nil)
	size := 32
	if m == scram.SHA512 {
		size = 64
	}
	return xscram.StoredCredentials{
		KeyFactors: xscram.KeyFactors{Salt: string(salt), Iters: scram.MinIterations},
		StoredKey:  make([]byte, size), ServerKey: make([]byte, size),
	}
}

func (x *scramExchange) Step(ctx context.Context, token []byte) (StepResult, error) {
	failed := func(err error) (StepResult, error) {
		if x.err != nil {
			return StepResult{}, &lookupError{user: x.user, err: x.err}
		}
		if x.fake {
			err = errors.New("unknown user")
		}
		return StepResult{}, &AuthenticationError{User: x.user, Message: "Authentication failed during authentication due to invalid credentials with SASL mechanism " + x.m.Name(), Err: err}
	}
	x.steps++
	if err := x.check(token, x.steps == 1); err != nil {
		return failed(err)
	}
	x.ctx = ctx
	resp, err := x.conv.Step(string(token))
	x.ctx = nil
	if err != nil {
		return failed(err)
	}
	if !x.conv.Done() {
		if z := x.conv.AuthzID(); z != "" {
			if zid, err := decodeSCRAMName(z); err != nil || zid != x.user {
				return failed(errors.New("an authorization id other than the user name"))
			}
		}
		return StepResult{Response: []byte(resp)}, nil
	}
	if !x.conv.Valid() || x.fake {
		return failed(errors.New("a wrong proof"))
	}
	return StepResult{Response: []byte(resp), Done: true, User: x.user}, nil
}

// check refuses what xdg-go/scram's parser does not expect before it
// sees it: a client-first message with an empty GS2 flag, or one asking
// for a delegation token (tokenauth=true, which this server does not
// serve); a client-final message whose proof is not as long as the
// hash (which it would index past).
func (x *scramExchange) check(token []byte, first bool) error {
	if first {
		if len(token) == 0 || token[0] == ',' {
			return errors.New("a client-first message without a GS2 flag")
		}
		for _, f := range bytes.Split(token, []byte{','}) {
			if string(f) == "tokenauth=true" {
				return errors.New("a delegation token (tokenauth=true)")
			}
		}
		return nil
	}
	i := bytes.LastIndexByte(token, ',')
	p, ok := bytes.CutPrefix(token[i+1:], []byte("p="))
	if !ok {
		return errors.New("a client-final message without a proof")
	}
	proof, err := base64.StdEncoding.DecodeString(string(p))
	if err != nil {
		return fmt.Errorf("a client-final message's proof: %w", err)
	}
	size := 32
	if x.m == scram.SHA512 {
		size = 64
	}
	if len(proof) != size {
		return fmt.Errorf("a proof of %d bytes, not %d", len(proof), size)
	}
	return nil
}

// decodeSCRAMName decodes a SCRAM saslname (RFC 5802): "=2C" is ',',
// "=3D" is '='; any other '=' is an error.
func decodeSCRAMName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", errors.New("a SCRAM name with '=' not followed by 2C or 3D")
		}
		i += 2
	}
	return b.String(), nil
}
