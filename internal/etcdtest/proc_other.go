//go:build !linux

package etcdtest

import "syscall"

// sysProcAttr is nil where the kernel cannot kill a child when its parent
// dies: a test process that dies before its cleanup leaves its members
// running.
func sysProcAttr() *syscall.SysProcAttr { return nil }
