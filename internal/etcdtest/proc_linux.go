package etcdtest

import "syscall"

// sysProcAttr has the kernel kill a member if the test process dies
// before its cleanup (a panic, a timeout, a SIGKILL), so that no etcd
// outlives its test holding ports. The signal follows the death of the
// thread that started the member, which in Go is the process's: the
// runtime ends a thread only when a goroutine that locked it exits.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
