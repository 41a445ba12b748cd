package etcdtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// rootUser is etcd's user that may do everything, and its role's name.
const rootUser = "root"

// enableAuth creates user root (with a random password, which the
// cluster's own clients use from then on) and a.User, whose role (named
// after it) may read and write the keys under a.Prefix, and turns
// authentication on: etcdctl's user add, role add, role grant-permission
// --prefix, user grant-role and auth enable.
func (c *Cluster) enableAuth(a Auth, deadline time.Time) error {
	pw := make([]byte, 16)
	rand.Read(pw)
	root := hex.EncodeToString(pw)
	cli, err := clientv3.New(clientConfig(c.Endpoints(), zap.NewNop(), c.acc))
	if err != nil {
		return fmt.Errorf("etcdtest: connecting to enable authentication: %w", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	role := a.User
	key, end := a.Prefix, clientv3.GetPrefixRangeEnd(a.Prefix)
	if a.Prefix == "" {
		key, end = "\x00", "\x00" // every key
	}
	for _, step := range []struct {
		what string
		do   func() error
	}{
		{"adding user root", func() error { _, err := cli.UserAdd(ctx, rootUser, root); return err }},
		{"granting root the root role", func() error { _, err := cli.UserGrantRole(ctx, rootUser, rootUser); return err }},
		{"adding role " + role, func() error { _, err := cli.RoleAdd(ctx, role); return err }},
		{"granting role " + role + " readwrite on " + a.Prefix, func() error {
			_, err := cli.RoleGrantPermission(ctx, role, key, end, clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		}},
		{"adding user " + a.User, func() error { _, err := cli.UserAdd(ctx, a.User, a.Password); return err }},
		{"granting " + a.User + " role " + role, func() error { _, err := cli.UserGrantRole(ctx, a.User, role); return err }},
		{"enabling authentication", func() error { _, err := cli.AuthEnable(ctx); return err }},
	} {
		if err := step.do(); err != nil {
			return fmt.Errorf("etcdtest: %s: %w", step.what, err)
		}
	}
	c.acc.user, c.acc.password = rootUser, root
	return nil
}
