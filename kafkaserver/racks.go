package kafkaserver

import "sync"

// clientRacks remembers the racks clients told, by IP address and client
// ID, at most maxClientRacks of them (past that it starts again). It is
// safe for concurrent use.
type clientRacks struct {
	mu sync.Mutex
	m  map[string]string
}

// maxClientRacks bounds what clientRacks remembers.
const maxClientRacks = 10000

func (r *clientRacks) set(key, rack string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[key] == rack {
		return
	}
	if r.m == nil || len(r.m) >= maxClientRacks {
		r.m = map[string]string{}
	}
	r.m[key] = rack
}

func (r *clientRacks) get(key string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[key]
}

// setRack remembers the client's rack, unless it is "": on the
// connection, and on the server for its IP address and client ID, since
// a client may send Metadata on another connection than its fetches
// (franz-go has one for each).
func (c *conn) setRack(clientID, rack string) {
	if rack == "" {
		return
	}
	c.mu.Lock()
	c.mu.rack = rack
	c.mu.Unlock()
	c.s.racks.set(c.ip+"\x00"+clientID, rack)
}

// rack returns the client's rack, "" if it has told none on this
// connection or, from its IP address, with its client ID on another.
func (c *conn) rack(clientID string) string {
	c.mu.Lock()
	r := c.mu.rack
	c.mu.Unlock()
	if r == "" {
		r = c.s.racks.get(c.ip + "\x00" + clientID)
	}
	return r
}
