package kafkaserver

// TEMPORARY until the SASL branch is merged.
func (c *conn) principal() string { return Anonymous }
