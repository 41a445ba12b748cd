package coordinator

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/diskless-go/diskless/kafkaerr"
)

// Versions of the calls between brokers.
//
// Every call a Forwarder carries has a method and a version. Version 1 of
// a method travels under the method's name alone, as it did before calls
// had versions, so that a broker of this release and one of the release
// before can call each other; version n > 1 travels as "<name>.v<n>".
// Each broker advertises the highest version of every method it speaks
// (PeerVersions, lowered by Options.PeerVersions) with its membership,
// and a caller sends the highest version both it and the shard's leader
// speak, chosen again at every attempt (the leader may change between
// two). A broker that is sent a method or a version it does not speak
// answers UNSUPPORTED_VERSION without reading the body, and the caller,
// whose picture of the leader was stale, sends the call again in a
// version chosen anew, until its context ends; a call the leader cannot
// take in any version (a method newer than its release) fails at once
// with UNSUPPORTED_VERSION.
//
// The body of a version never changes. Version 1 of every method is the
// gob encoding of its request and answer types, and those types are
// pinned: testdata/peer-messages.txt lists each version's types field by
// field, and TestPeerMessagesPinned fails when one changes. A change to
// a pinned type (a field added, renamed or retyped) is a new version of
// the method: the old type is kept, under a name of its own, for the old
// version, and the new one is listed beside it. Version 2 of commit, the
// hottest call, has an encoding of its own (peer_commit.go): a request
// of fixed fields and varints, with no reflection; version 3 answers in
// one too.
//
// Upgrading a cluster one broker at a time, nothing more is needed: a
// new broker speaks the old versions to old leaders and the new ones to
// new leaders. Options.PeerVersions (the example broker's -peer-versions)
// keeps a broker to older versions, as Kafka's inter.broker.protocol.version
// did, for a staged upgrade or a test of one.

// peerVersions are the highest versions this release speaks, by method.
var peerVersions = func() map[string]int {
	m := map[string]int{}
	for wire := range serveFuncs {
		name, v, ok := parseWireMethod(wire)
		if !ok {
			panic("coordinator: malformed method " + wire)
		}
		m[name] = max(m[name], v)
	}
	return m
}()

// PeerVersions returns the highest version of each method of the calls
// between brokers that this release speaks, lowered to limit's (a method
// limit names at 0 or less, or does not know, is left as it is). A
// broker advertises it with its membership (cluster.Member.Speaks).
func PeerVersions(limit map[string]int) map[string]int { return lowered(peerVersions, limit) }

// CheckPeerVersions says whether limit names only methods of the calls
// between brokers and versions this release speaks (Options.PeerVersions).
func CheckPeerVersions(limit map[string]int) error {
	return checkLevels(peerVersions, limit, "PeerVersions", "a method of the calls between brokers")
}

// lowered returns highest with each level limit names (above 0, for a
// name highest has) lowered to it.
func lowered(highest, limit map[string]int) map[string]int {
	m := maps.Clone(highest)
	for name, v := range limit {
		if have, ok := m[name]; ok && v > 0 {
			m[name] = min(have, v)
		}
	}
	return m
}

// checkLevels says whether limit (the option named what) names only
// names highest has (kind says what they are), each at a level from 1
// to highest's.
func checkLevels(highest, limit map[string]int, what, kind string) error {
	for name, v := range limit {
		have, ok := highest[name]
		switch {
		case !ok:
			return fmt.Errorf("%w: %s names %q, not %s", ErrInvalidOptions, what, name, kind)
		case v < 1 || v > have:
			return fmt.Errorf("%w: %s gives %q %d: this release has 1 to %d", ErrInvalidOptions, what, name, v, have)
		}
	}
	return nil
}

// LeaderVersioner is a Forwarder that knows which versions of the calls
// a shard's leader speaks: package cluster's Node, from the membership
// each broker advertises. A Forwarder that is not one is taken to reach
// brokers of this release (they speak what this one does).
type LeaderVersioner interface {
	// LeaderVersions returns the highest version of each method shard's
	// leader advertised, nil if it advertised none (a release before
	// versions, which speaks version 1 of the methods it knows) or if
	// the shard has no leader known here.
	LeaderVersions(shard int) map[string]int
}

// wireMethod is a method's name on the wire in version v.
func wireMethod(name string, v int) string {
	if v <= 1 {
		return name
	}
	return name + ".v" + strconv.Itoa(v)
}

// parseWireMethod splits a method's name on the wire into its name and
// version.
func parseWireMethod(wire string) (name string, v int, ok bool) {
	i := strings.LastIndex(wire, ".v")
	if i < 0 {
		return wire, 1, wire != ""
	}
	v, err := strconv.Atoi(wire[i+2:])
	if err != nil || v < 2 || wire[i+2] == '0' || wire[i+2] == '+' {
		return "", 0, false
	}
	return wire[:i], v, i > 0
}

// errNoVersion: the broker asked does not speak the method, or not in
// the version sent.
var errNoVersion = errors.New("coordinator: the broker asked does not speak the call in this version")

// noVersionErr is the answer to wire, a method or version not spoken
// here.
func noVersionErr(wire string) error {
	return &kafkaerr.Error{Code: kafkaerr.UnsupportedVersion, Message: fmt.Sprintf("no call %q between brokers in this release", wire), Err: errNoVersion}
}

// peerVersion is the version of method to send to shard's leader now:
// the highest both speak.
func (r *remoteShard) peerVersion(method string) (int, error) {
	local := r.s.speaks[method]
	lv, ok := r.s.opts.Forwarder.(LeaderVersioner)
	if !ok {
		return local, nil
	}
	remote := lv.LeaderVersions(r.shard)
	if remote == nil {
		return 1, nil
	}
	v, ok := remote[method]
	if !ok || v < 1 {
		return 0, kafkaerr.New(kafkaerr.UnsupportedVersion,
			"coordinator: the leader of shard %d runs a release without the call %q", r.shard, method)
	}
	return min(local, v), nil
}
