package store

import (
	"context"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/coordinator/state"
)

// The writer's statements of ACL records.
const (
	sqlInsertACL = "INSERT OR IGNORE INTO acls (resource_type, resource_name, pattern_type, principal, host, operation, permission) VALUES (?, ?, ?, ?, ?, ?, ?)"
	sqlDeleteACL = "DELETE FROM acls WHERE resource_type = ? AND resource_name = ? AND pattern_type = ? AND principal = ? AND host = ? AND operation = ? AND permission = ?"
	sqlLoadACLs  = "SELECT resource_type, resource_name, pattern_type, principal, host, operation, permission FROM acls"
)

// writeACLs writes an ACL record.
func (s *DB) writeACLs(ctx context.Context, r state.Record) error {
	q, bs := sqlInsertACL, []acl.Binding(nil)
	switch r := r.(type) {
	case state.ACLCreateRecord:
		bs = r.Bindings
	case state.ACLDeleteRecord:
		q, bs = sqlDeleteACL, r.Bindings
	}
	for _, b := range bs {
		if _, err := s.exec(ctx, q, int64(b.ResourceType), b.ResourceName, int64(b.PatternType), b.Principal, b.Host, int64(b.Operation), int64(b.Permission)); err != nil {
			return err
		}
	}
	return nil
}
