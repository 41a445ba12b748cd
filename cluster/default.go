package cluster

// defaultTransport is the Transport of a Node whose Options name none.
func defaultTransport() Transport { return &TCP{} }
