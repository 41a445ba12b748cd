package kafkaserver

import (
	"context"
	"crypto/tls"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"
)

// checkTLS refuses a Config.TLS that could not serve a handshake: one
// with no certificate, nor a function to find one.
func checkTLS(c *tls.Config) error {
	if c != nil && len(c.Certificates) == 0 && c.GetCertificate == nil && c.GetConfigForClient == nil {
		return errors.New("kafkaserver: Config.TLS has no certificate (Certificates, GetCertificate or GetConfigForClient)")
	}
	return nil
}

// startTLS runs the TLS handshake of a connection Serve wrapped with
// tls.Server, within FrameTimeout (or until Close), and reports whether
// it succeeded. A client certificate, when there is one, gives the
// connection its TLS principal: "User:" and the certificate's subject in
// RFC 2253 form, as Kafka's default principal builder names it. A
// failed handshake (a plaintext client on a TLS port, a client without
// the certificate Config.TLS requires) is counted and logged at most
// once a second; the client is sent nothing but what crypto/tls sends.
func (c *conn) startTLS() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(c.s.ctx, c.s.cfg.FrameTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		failed := c.s.stats.tlsFailed.Add(1)
		if c.s.stats.tlsFailedLog.allow(c.s.clock.Now()) {
			c.s.log.Info("a TLS handshake failed (logged at most once a second)", zap.String("client", c.remote), zap.Int64("failed", failed), zap.Error(err))
		}
		return false
	}
	// The principal comes from a certificate the config verified against
	// its CAs (RequireAndVerifyClientCert, VerifyClientCertIfGiven): with
	// RequestClientCert or RequireAnyClientCert anyone may present any
	// subject, and such a connection stays anonymous, as without one.
	if chains := tc.ConnectionState().VerifiedChains; len(chains) > 0 && len(chains[0]) > 0 {
		name, err := rfc2253(chains[0][0].RawSubject)
		if err != nil {
			// crypto/x509 parsed this subject; a subject it takes and
			// we cannot name is refused rather than named wrongly.
			c.s.log.Info("closing a connection: its client certificate's subject", zap.String("client", c.remote), zap.Error(err))
			return false
		}
		c.auth.setTLSPrincipal("User:" + name)
	}
	return true
}

// The attribute types that RFC 2253 gives a keyword (section 2.3), the
// only ones Java's X500Principal.getName() names: others are written as
// their dotted OID and a '#' and the hex of their DER value.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.9":                    "STREET",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"0.9.2342.19200300.100.1.1":  "UID",
	"0.9.2342.19200300.100.1.25": "DC",
}

// attributeTypeAndValue is one attribute of a relative distinguished
// name, its value kept as it was encoded.
type attributeTypeAndValue struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// rfc2253 returns a distinguished name, given as its DER encoding (an
// X.509 certificate's RawSubject), in the RFC 2253 form that Java's
// X500Principal.getName() gives and so Kafka's default principal builder
// uses for a client certificate: the relative distinguished names last
// first, separated by ','; the attributes of a multi-valued one in their
// encoded order, separated by '+'; each as KEYWORD=value for the
// keywords of rfc2253Keywords when the value is a string type Java reads
// as one (PrintableString, T61String, IA5String, GeneralString,
// BMPString, UTF8String), its bytes read as UTF-8 as Java reads them,
// with ,=+<>#;"\ escaped by a backslash, NUL as \00, and leading and
// trailing spaces (and carriage returns) escaped; and otherwise as the
// dotted OID (or keyword), '#' and the lowercase hex of the value's DER
// encoding. For example "CN=alice,OU=eng,O=acme".
func rfc2253(der []byte) (string, error) {
	var rdns []asn1.RawValue
	rest, err := asn1.Unmarshal(der, &rdns)
	if err != nil {
		return "", fmt.Errorf("a distinguished name: %w", err)
	}
	if len(rest) > 0 {
		return "", errors.New("a distinguished name: bytes after it")
	}
	var b strings.Builder
	for i := len(rdns) - 1; i >= 0; i-- {
		rdn := rdns[i]
		if rdn.Class != asn1.ClassUniversal || rdn.Tag != asn1.TagSet || !rdn.IsCompound {
			return "", errors.New("a relative distinguished name that is not a SET")
		}
		var atvs []attributeTypeAndValue
		rest, err := asn1.UnmarshalWithParams(rdn.FullBytes, &atvs, "set")
		if err != nil {
			return "", fmt.Errorf("a relative distinguished name: %w", err)
		}
		if len(rest) > 0 || len(atvs) == 0 {
			return "", errors.New("a relative distinguished name: empty, or bytes after it")
		}
		if i < len(rdns)-1 {
			b.WriteByte(',')
		}
		for j, atv := range atvs {
			if j > 0 {
				b.WriteByte('+')
			}
			appendRFC2253Attribute(&b, atv)
		}
	}
	return b.String(), nil
}

// appendRFC2253Attribute writes one attribute as rfc2253 describes.
func appendRFC2253Attribute(b *strings.Builder, atv attributeTypeAndValue) {
	oid := atv.Type.String()
	keyword, known := rfc2253Keywords[oid]
	if !known {
		keyword = oid
	}
	b.WriteString(keyword)
	b.WriteByte('=')
	if !known || !javaDirectoryString(atv.Value) {
		b.WriteByte('#')
		b.WriteString(hex.EncodeToString(atv.Value.FullBytes))
		return
	}
	// Java escapes in UTF-16 code units and then, separately, the
	// leading and trailing spaces of the escaped text; with no escapes
	// of spaces among the first, escaping by runes gives the same.
	var escaped []rune
	for _, r := range string(atv.Value.Bytes) { // invalid UTF-8 reads as U+FFFD
		switch {
		case strings.ContainsRune(`,=+<>#;"\`, r):
			escaped = append(escaped, '\\', r)
		case r == 0:
			escaped = append(escaped, '\\', '0', '0')
		default:
			escaped = append(escaped, r)
		}
	}
	lead := 0
	for lead < len(escaped) && (escaped[lead] == ' ' || escaped[lead] == '\r') {
		lead++
	}
	trail := len(escaped) - 1
	for trail >= 0 && (escaped[trail] == ' ' || escaped[trail] == '\r') {
		trail--
	}
	for i, r := range escaped {
		if i < lead || i > trail {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
}

// javaDirectoryString reports whether v is of a string type Java writes
// as text in RFC 2253 form (its AVA.isDerString, not canonical).
func javaDirectoryString(v asn1.RawValue) bool {
	if v.Class != asn1.ClassUniversal || v.IsCompound {
		return false
	}
	switch v.Tag {
	case asn1.TagPrintableString, asn1.TagT61String, asn1.TagIA5String, asn1.TagGeneralString, asn1.TagBMPString, asn1.TagUTF8String:
		return true
	}
	return false
}
