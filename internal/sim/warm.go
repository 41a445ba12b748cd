package sim

import (
	"runtime"
	"sync"

	"github.com/diskless-go/diskless/kbatch"
)

// BeforeBubble prepares the process for a run in a new synctest bubble;
// call it outside any bubble, before each one. A channel (or timer)
// created in a bubble belongs to it, and any other bubble that operates
// on it panics ("receive on synctest channel from outside bubble"). Two
// kinds of state of the module outlive a bubble and hold such channels:
//
//   - what is made once per process on first use and kept: kbatch's zstd
//     encoder (a sync.Once), whose pool of encoders is a channel. It is
//     made here, outside any bubble, once;
//   - what sync.Pools keep: kbatch's pooled zstd decoders each hold a
//     channel of block decoders. Two garbage collections empty every
//     sync.Pool (the first moves what they hold to their victim caches,
//     the second drops it), so that no decoder made in the last bubble
//     reaches the next.
func BeforeBubble() {
	warmOnce.Do(func() {
		for _, codec := range kbatch.Codecs {
			b := kbatch.NewBuilder(codec)
			b.Append(0, nil, []byte("warm"))
			if _, err := b.Build(nil); err != nil {
				panic(err)
			}
		}
	})
	runtime.GC()
	runtime.GC()
}

var warmOnce sync.Once
