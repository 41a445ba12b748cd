package cache

// keyLRU maps keys to values and remembers at most capacity of them,
// dropping the least recently set first. Cache uses one for its hot keys
// and one for the sizes of objects it has seen. It is not safe for
// concurrent use: Cache guards both with its mutex.
type keyLRU[V any] struct {
	capacity int
	keys     map[string]*lruEntry[V]
	lru      lruEntry[V] // sentinel: lru.next is the most recently set
}

type lruEntry[V any] struct {
	key string
	val V
	lruLinks[lruEntry[V]]
}

// init makes l empty, remembering up to capacity keys. The list's sentinel
// points to itself, so a keyLRU is set up in place and never copied.
func (l *keyLRU[V]) init(capacity int) {
	l.capacity = capacity
	l.keys = make(map[string]*lruEntry[V])
	lruInit(&l.lru)
}

// get returns the value of key; it does not change the order.
func (l *keyLRU[V]) get(key string) (V, bool) {
	if e := l.keys[key]; e != nil {
		return e.val, true
	}
	var zero V
	return zero, false
}

// set sets the value of key and makes it the most recently set.
func (l *keyLRU[V]) set(key string, val V) {
	if e := l.keys[key]; e != nil {
		e.val = val
		lruUnlink(e)
		lruPushFront(&l.lru, e)
		return
	}
	if len(l.keys) >= l.capacity {
		old := l.lru.prev
		lruUnlink(old)
		delete(l.keys, old.key)
	}
	e := &lruEntry[V]{key: key, val: val}
	l.keys[key] = e
	lruPushFront(&l.lru, e)
}

func (l *keyLRU[V]) remove(key string) {
	if e := l.keys[key]; e != nil {
		lruUnlink(e)
		delete(l.keys, key)
	}
}
