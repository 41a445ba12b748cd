// Command diskless-etcd is the etcd server that the tests of diskless start
// (internal/etcdtest): etcd's own main, from a pinned release.
//
// It lives in a module of its own for two reasons: `go install
// go.etcd.io/etcd/server/v3@version` refuses to build etcd (its go.mod has
// replace directives), and the server's dependencies stay out of the
// library's go.mod. `make deps` builds it into $GOPATH/bin/diskless-etcd.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
