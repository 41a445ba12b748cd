package etcdlog

// FailNext makes the next put of l fail.
func FailNext(l *Log) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.failNext = errInjected
}
