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
	key        string
	val        V
	prev, next *lruEntry[V]
}

// init makes l empty, remembering up to capacity keys. The list's sentinel
// points to itself, so a keyLRU is set up in place and never copied.
func (l *keyLRU[V]) init(capacity int) {
	l.capacity = capacity
	l.keys = make(map[string]*lruEntry[V])
	l.lru.next, l.lru.prev = &l.lru, &l.lru
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
		l.unlink(e)
		l.pushFront(e)
		return
	}
	if len(l.keys) >= l.capacity {
		old := l.lru.prev
		l.unlink(old)
		delete(l.keys, old.key)
	}
	e := &lruEntry[V]{key: key, val: val}
	l.keys[key] = e
	l.pushFront(e)
}

func (l *keyLRU[V]) remove(key string) {
	if e := l.keys[key]; e != nil {
		l.unlink(e)
		delete(l.keys, key)
	}
}

func (l *keyLRU[V]) pushFront(e *lruEntry[V]) {
	e.prev = &l.lru
	e.next = l.lru.next
	e.next.prev = e
	l.lru.next = e
}

func (l *keyLRU[V]) unlink(e *lruEntry[V]) {
	e.prev.next = e.next
	e.next.prev = e.prev
}
