package store

import (
	"cmp"
	"context"
	"strings"

	"github.com/diskless-go/diskless/coordinator/state"
	"github.com/diskless-go/diskless/scram"
)

// CompareCredentials orders credentials by user, then mechanism.
func CompareCredentials(a, b scram.Credential) int {
	return cmp.Or(strings.Compare(a.User, b.User), cmp.Compare(a.Mechanism, b.Mechanism))
}

// The writer's statements of SCRAM records.
const (
	sqlUpsertScram = "INSERT INTO scram_credentials (user_name, mechanism, salt, iterations, stored_key, server_key) VALUES (?, ?, ?, ?, ?, ?) " +
		"ON CONFLICT (user_name, mechanism) DO UPDATE SET salt = excluded.salt, iterations = excluded.iterations, stored_key = excluded.stored_key, server_key = excluded.server_key"
	sqlDeleteScram = "DELETE FROM scram_credentials WHERE user_name = ? AND mechanism = ?"
	sqlLoadScram   = "SELECT user_name, mechanism, salt, iterations, stored_key, server_key FROM scram_credentials"
)

// writeScram writes a SCRAM record.
func (s *DB) writeScram(ctx context.Context, r state.Record) error {
	var err error
	switch r := r.(type) {
	case state.ScramUpsertRecord:
		c := r.Cred
		_, err = s.exec(ctx, sqlUpsertScram, c.User, int64(c.Mechanism), c.Salt, int64(c.Iterations), c.StoredKey, c.ServerKey)
	case state.ScramDeleteRecord:
		_, err = s.exec(ctx, sqlDeleteScram, r.Key.User, int64(r.Key.Mechanism))
	}
	return err
}
