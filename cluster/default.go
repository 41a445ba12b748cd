package cluster

// defaultTransport is the Transport of a Node whose Options name none: a
// TCP with the default options.
func defaultTransport() Transport {
	t, err := NewTCP(nil)
	if err != nil {
		panic(err) // the defaults are valid
	}
	return t
}
