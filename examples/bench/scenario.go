package main

import (
	"fmt"
	"strings"
	"time"
)

// scenario is one workload of the acks study (docs/architecture.md, "The acks study"),
// replayed against a diskless Broker and a classic leader.
type scenario struct {
	Name        string
	Title       string
	Partitions  int
	Producers   int
	MessageSize int
	// SlowUpload caps the object store's upload bandwidth (S4).
	SlowUpload bool
	// Sustained runs longer (S6).
	Sustained bool
}

// scenarios are S1 to S6.
var scenarios = []scenario{
	{Name: "S1", Title: "one partition, one producer", Partitions: 1, Producers: 1, MessageSize: 1024},
	{Name: "S2", Title: "6 partitions, 6 producers", Partitions: 6, Producers: 6, MessageSize: 1024},
	{Name: "S3", Title: "6 partitions, 20 producers", Partitions: 6, Producers: 20, MessageSize: 1024},
	{Name: "S4", Title: "6 partitions, 6 producers, slow object store (uploads capped)", Partitions: 6, Producers: 6, MessageSize: 1024, SlowUpload: true},
	{Name: "S5", Title: "6 partitions, 6 producers, 10 KiB messages", Partitions: 6, Producers: 6, MessageSize: 10 << 10},
	{Name: "S6", Title: "6 partitions, 6 producers, sustained", Partitions: 6, Producers: 6, MessageSize: 1024, Sustained: true},
}

// selectScenarios parses -scenario: "all" or a comma list of names.
func selectScenarios(s string) ([]scenario, error) {
	if strings.EqualFold(strings.TrimSpace(s), "all") {
		return scenarios, nil
	}
	var out []scenario
	for _, name := range strings.Split(s, ",") {
		name = strings.ToUpper(strings.TrimSpace(name))
		found := false
		for _, sc := range scenarios {
			if sc.Name == name {
				out = append(out, sc)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("-scenario: no scenario %q (S1 to S6, or all)", name)
		}
	}
	return out, nil
}

// acksLevel is a produce request's acks.
type acksLevel int16

func (a acksLevel) String() string {
	if a == -1 {
		return "all"
	}
	return fmt.Sprint(int16(a))
}

// parseAcks parses -acks: a comma list of 0, 1 and all.
func parseAcks(s string) ([]acksLevel, error) {
	var out []acksLevel
	for _, a := range strings.Split(s, ",") {
		switch strings.TrimSpace(strings.ToLower(a)) {
		case "0":
			out = append(out, 0)
		case "1":
			out = append(out, 1)
		case "all", "-1":
			out = append(out, -1)
		default:
			return nil, fmt.Errorf("-acks: %q is not 0, 1 or all", a)
		}
	}
	return out, nil
}

// runDuration is how long a scenario's runs measure.
func (o *options) runDuration(sc scenario) time.Duration {
	switch {
	case sc.Sustained && o.long:
		return 30 * time.Minute
	case sc.Sustained:
		return 3 * o.duration
	}
	return o.duration
}
