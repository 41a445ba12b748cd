package cache

// lruLinks are the links of an element of an intrusive LRU list: a
// circular doubly linked list through a sentinel element, whose next is
// the most recently used. An element type embeds lruLinks of itself.
type lruLinks[E any] struct {
	prev, next *E
}

func (l *lruLinks[E]) links() *lruLinks[E] { return l }

// lruElem is a pointer to an element that embeds lruLinks[E].
type lruElem[E any] interface {
	*E
	links() *lruLinks[E]
}

// lruInit makes sentinel the sentinel of an empty list: it points to
// itself, so the list is set up in place and never copied.
func lruInit[E any, P lruElem[E]](sentinel P) {
	l := sentinel.links()
	l.prev, l.next = sentinel, sentinel
}

// lruPushFront links e in after sentinel, as the most recently used.
func lruPushFront[E any, P lruElem[E]](sentinel, e P) {
	l, s := e.links(), sentinel.links()
	l.prev = sentinel
	l.next = s.next
	P(l.next).links().prev = e
	s.next = e
}

// lruUnlink takes e out of its list.
func lruUnlink[E any, P lruElem[E]](e P) {
	l := e.links()
	P(l.prev).links().next = l.next
	P(l.next).links().prev = l.prev
	l.prev, l.next = nil, nil
}

// deleteBlock deletes block idx of key from a tier's index, and the key
// when it has no block left.
func deleteBlock[E any](keys map[string]map[int64]*E, key string, idx int64) {
	blocks := keys[key]
	delete(blocks, idx)
	if len(blocks) == 0 {
		delete(keys, key)
	}
}
