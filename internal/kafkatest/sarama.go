package kafkatest

import (
	"github.com/IBM/sarama"
	xscram "github.com/xdg-go/scram"
)

// SaramaSCRAM is sarama's SCRAMClient over github.com/xdg-go/scram, for
// sarama's Net.SASL.SCRAMClientGeneratorFunc.
type SaramaSCRAM struct {
	Hash xscram.HashGeneratorFcn
	conv *xscram.ClientConversation
}

var _ sarama.SCRAMClient = (*SaramaSCRAM)(nil)

// Begin starts a conversation as user.
func (s *SaramaSCRAM) Begin(user, pass, authzID string) error {
	c, err := s.Hash.NewClient(user, pass, authzID)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}

// Step answers the server's challenge.
func (s *SaramaSCRAM) Step(challenge string) (string, error) { return s.conv.Step(challenge) }

// Done reports whether the conversation is over.
func (s *SaramaSCRAM) Done() bool { return s.conv.Done() }
