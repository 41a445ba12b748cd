package kafkaserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// oauthExchange is SASL/OAUTHBEARER (RFC 7628) as Kafka serves it: the
// client's first message carries the token, which the validator checks.
// A token it refuses is answered with the error
// {"status":"invalid_token"}, to which the client sends %x01, and the
// authentication then fails with that error as its message.
type oauthExchange struct {
	validate OAuthBearerValidator
	refused  error // the validator's error, once the token was refused
}

// oauthInvalidToken is the error challenge of a refused token.
const oauthInvalidToken = `{"status":"invalid_token"}`

func (o *oauthExchange) Step(ctx context.Context, token []byte) (StepResult, error) {
	if o.refused != nil {
		return StepResult{}, &AuthenticationError{Message: oauthInvalidToken, Err: o.refused}
	}
	msg, err := parseOAuthBearer(token)
	if err != nil {
		return StepResult{}, &AuthenticationError{Message: "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER", Err: err}
	}
	principal, expires, err := o.validate(ctx, msg.token)
	if err == nil && principal == "" {
		err = errors.New("the validator named no principal")
	}
	if err != nil {
		o.refused = err
		return StepResult{Response: []byte(oauthInvalidToken)}, nil
	}
	if msg.authzid != "" && msg.authzid != principal {
		return StepResult{}, &AuthenticationError{User: principal, Message: fmt.Sprintf("Authentication failed: Client requested an authorization id (%s) that is different from the token's principal name (%s)", msg.authzid, principal)}
	}
	return StepResult{Response: []byte{}, Done: true, User: principal, Expires: expires}, nil
}

// oauthBearerMessage is an OAUTHBEARER client-first message.
type oauthBearerMessage struct {
	authzid    string            // "" if none
	token      string            // the bearer token
	extensions map[string]string // the key-value pairs but auth
}

// parseOAuthBearer parses an OAUTHBEARER client-first message (RFC 7628
// section 3.1) as Kafka's OAuthBearerClientInitialResponse does:
//
//	n,[a=authzid],%x01key=value%x01...key=value%x01%x01
//
// The GS2 header's flag must be n (no channel binding); the authzid a
// saslname (US-ASCII but ',' and '=', or =2C and =3D, kept encoded);
// keys letters, values printable US-ASCII, space, tab, CR and LF; the
// last pair of a key counts. The pair auth must be present,
// "Bearer <token>" (the scheme in any case, one or more spaces), the
// token of letters, digits and -_. only.
func parseOAuthBearer(msg []byte) (oauthBearerMessage, error) {
	var m oauthBearerMessage
	rest, ok := bytes.CutPrefix(msg, []byte("n,"))
	if !ok {
		return m, errors.New("a GS2 header that is not n,")
	}
	if z, ok := bytes.CutPrefix(rest, []byte("a=")); ok {
		end := bytes.IndexByte(z, ',')
		if end <= 0 || !isSASLName(z[:end]) {
			return m, errors.New("an authzid that is not a saslname")
		}
		m.authzid, rest = string(z[:end]), z[end:]
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(",\x01")); !ok {
		return m, errors.New("a GS2 header not followed by %x01")
	}
	body, ok := bytes.CutSuffix(rest, []byte("\x01"))
	if !ok {
		return m, errors.New("no final %x01")
	}
	var auth string
	var found bool
	for len(body) > 0 {
		end := bytes.IndexByte(body, 0x01)
		if end < 0 {
			return m, errors.New("a key-value pair without its %x01")
		}
		pair := body[:end]
		body = body[end+1:]
		k, v, ok := bytes.Cut(pair, []byte("="))
		if !ok || !isOAuthKey(k) || !isOAuthValue(v) {
			return m, fmt.Errorf("a malformed key-value pair %q", pair)
		}
		if string(k) == "auth" {
			auth, found = string(v), true
			continue
		}
		if m.extensions == nil {
			m.extensions = map[string]string{}
		}
		m.extensions[string(k)] = string(v)
	}
	if !found {
		return m, errors.New("no auth")
	}
	scheme, token, ok := strings.Cut(auth, " ")
	token = strings.TrimLeft(token, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || token == "" || !isOAuthToken(token) {
		return m, errors.New("an auth that is not Bearer and a token")
	}
	m.token = token
	return m, nil
}

// isSASLName reports whether b is a saslname as Kafka takes it:
// US-ASCII 0x01 to 0x7F but ',' and '=', which appear as =2C and =3D.
func isSASLName(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '=':
			if !bytes.HasPrefix(b[i:], []byte("=2C")) && !bytes.HasPrefix(b[i:], []byte("=3D")) {
				return false
			}
			i += 2
		case c == 0 || c > 0x7f || c == ',':
			return false
		}
	}
	return len(b) > 0
}

func isOAuthKey(b []byte) bool {
	for _, c := range b {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return len(b) > 0
}

func isOAuthValue(b []byte) bool {
	for _, c := range b {
		if (c < 0x21 || c > 0x7e) && c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return len(b) > 0
}

func isOAuthToken(s string) bool {
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// UnsecuredJWTValidator is an OAuthBearerValidator of unsecured JSON
// Web Tokens (RFC 7515 with alg "none", no signature), as Kafka's
// OAuthBearerUnsecuredValidatorCallbackHandler validates them: the
// header's alg must be "none", the signature empty, the "sub" claim (a
// non-empty string) is the principal, and the "exp" claim (seconds since
// the epoch, required) is the expiry, which must be in the future ("iat",
// if given, must be a number no later than exp). It trusts whoever
// writes a token: it is for tests only, never for a broker clients
// reach.
func UnsecuredJWTValidator(_ context.Context, token string) (string, time.Time, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[2] != "" {
		return "", time.Time{}, errors.New("an unsecured JWT is header.claims. (empty signature)")
	}
	var header struct {
		Alg *string `json:"alg"`
	}
	if err := decodeJWTPart(parts[0], &header); err != nil {
		return "", time.Time{}, fmt.Errorf("the JWT's header: %w", err)
	}
	if header.Alg == nil || *header.Alg != "none" {
		return "", time.Time{}, errors.New(`the JWT's alg is not "none"`)
	}
	var claims struct {
		Sub any `json:"sub"`
		Exp any `json:"exp"`
		Iat any `json:"iat"`
	}
	if err := decodeJWTPart(parts[1], &claims); err != nil {
		return "", time.Time{}, fmt.Errorf("the JWT's claims: %w", err)
	}
	sub, ok := claims.Sub.(string)
	if !ok || strings.TrimSpace(sub) == "" {
		return "", time.Time{}, errors.New(`the JWT has no "sub" claim`)
	}
	exp, ok := claims.Exp.(float64)
	if !ok || math.IsNaN(exp) || exp > 1e15 || exp < -1e15 {
		return "", time.Time{}, errors.New(`the JWT has no numeric "exp" claim`)
	}
	if claims.Iat != nil {
		iat, ok := claims.Iat.(float64)
		if !ok || iat > exp {
			return "", time.Time{}, errors.New(`the JWT's "iat" claim is not a number before "exp"`)
		}
	}
	expires := time.UnixMilli(int64(exp * 1000))
	if !time.Now().Before(expires) { // real time: a public validator with no Clock, and a token's exp is wall time
		return "", time.Time{}, fmt.Errorf("the JWT expired at %v", expires.UTC())
	}
	return sub, expires, nil
}

// decodeJWTPart decodes a base64url part of a JWT (padded or not) as
// JSON into v.
func decodeJWTPart(part string, v any) error {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(part, "="))
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}
