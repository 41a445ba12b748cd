// Package scram holds SCRAM credentials (RFC 5802, RFC 7677) as Kafka
// stores them: a user's salt, iteration count, StoredKey and ServerKey
// for one mechanism, never the password. The broker keeps them as
// coordinator records; the SASL exchange itself is
// github.com/xdg-go/scram's, which these credentials feed.
//
//	SaltedPassword = PBKDF2(HMAC-H, password, salt, iterations)
//	ClientKey      = HMAC-H(SaltedPassword, "Client Key")
//	StoredKey      = H(ClientKey)
//	ServerKey      = HMAC-H(SaltedPassword, "Server Key")
package scram

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"errors"
	"fmt"
	"hash"
)

// Mechanism is a SCRAM mechanism, with the code Kafka's
// DescribeUserScramCredentials and AlterUserScramCredentials give it
// (part of the protocol and of the coordinator's records).
type Mechanism int8

// The mechanisms Kafka supports.
const (
	SHA256 Mechanism = 1 // SCRAM-SHA-256
	SHA512 Mechanism = 2 // SCRAM-SHA-512
)

// MinIterations and MaxIterations bound a credential's iteration count,
// as Kafka bounds it (ScramMechanism's minIterations and maxIterations).
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// Name returns the mechanism's SASL name ("SCRAM-SHA-256"), "" for an
// unknown one.
func (m Mechanism) Name() string {
	switch m {
	case SHA256:
		return "SCRAM-SHA-256"
	case SHA512:
		return "SCRAM-SHA-512"
	}
	return ""
}

// String returns the SASL name, or "UNKNOWN(n)".
func (m Mechanism) String() string {
	if n := m.Name(); n != "" {
		return n
	}
	return fmt.Sprintf("UNKNOWN(%d)", int8(m))
}

// ParseMechanism returns the mechanism of a SASL name.
func ParseMechanism(name string) (Mechanism, bool) {
	switch name {
	case "SCRAM-SHA-256":
		return SHA256, true
	case "SCRAM-SHA-512":
		return SHA512, true
	}
	return 0, false
}

// Valid reports whether m is a mechanism Kafka knows.
func (m Mechanism) Valid() bool { return m == SHA256 || m == SHA512 }

// hash returns the mechanism's hash function.
func (m Mechanism) hash() func() hash.Hash {
	if m == SHA512 {
		return sha512.New
	}
	return sha256.New
}

// Credential is one user's SCRAM credential for one mechanism. It is a
// value; its slices are not shared by the functions here.
type Credential struct {
	User       string
	Mechanism  Mechanism
	Salt       []byte
	Iterations int32
	StoredKey  []byte
	ServerKey  []byte
}

// ErrInvalid is returned for a mechanism Kafka does not know, an
// iteration count out of bounds, or an empty salt or password.
var ErrInvalid = errors.New("scram: invalid credential")

// FromSaltedPassword returns the credential of a salted password, as
// AlterUserScramCredentials carries it (KIP-554: the client salts, so the
// password never reaches the broker).
func FromSaltedPassword(user string, m Mechanism, salt, salted []byte, iterations int32) (Credential, error) {
	if !m.Valid() {
		return Credential{}, fmt.Errorf("%w: unknown mechanism %d", ErrInvalid, m)
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, fmt.Errorf("%w: %d iterations (Kafka takes %d to %d)", ErrInvalid, iterations, MinIterations, MaxIterations)
	}
	if len(salt) == 0 || len(salted) == 0 {
		return Credential{}, fmt.Errorf("%w: an empty salt or salted password", ErrInvalid)
	}
	h := m.hash()
	clientKey := mac(h, salted, "Client Key")
	sum := h()
	sum.Write(clientKey)
	return Credential{
		User: user, Mechanism: m, Salt: append([]byte(nil), salt...), Iterations: iterations,
		StoredKey: sum.Sum(nil), ServerKey: mac(h, salted, "Server Key"),
	}, nil
}

// SaltPassword returns PBKDF2 of the password with the mechanism's hash:
// the SaltedPassword of RFC 5802.
func SaltPassword(m Mechanism, password string, salt []byte, iterations int32) ([]byte, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("%w: unknown mechanism %d", ErrInvalid, m)
	}
	if password == "" {
		return nil, fmt.Errorf("%w: an empty password", ErrInvalid)
	}
	h := m.hash()
	return pbkdf2.Key(h, password, salt, int(iterations), h().Size())
}

// New returns a credential for a password, with a fresh random salt
// (32 bytes) and the given iterations (0 means MinIterations).
func New(user string, m Mechanism, password string, iterations int32) (Credential, error) {
	if iterations == 0 {
		iterations = MinIterations
	}
	salt := make([]byte, 32)
	rand.Read(salt)
	salted, err := SaltPassword(m, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return FromSaltedPassword(user, m, salt, salted, iterations)
}

// Check reports whether password is the credential's, in constant time
// for a given credential (SASL/PLAIN checks passwords this way, so that
// PLAIN and SCRAM share one store).
func (c Credential) Check(password string) bool {
	salted, err := SaltPassword(c.Mechanism, password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	other, err := FromSaltedPassword(c.User, c.Mechanism, c.Salt, salted, c.Iterations)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(other.StoredKey, c.StoredKey) == 1
}

func mac(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
