//go:build !unix

package diskless

import "os"

// lockDataDir takes no lock where flock is missing: the data folder is
// not protected from a second Broker there.
func lockDataDir(dir string) (*os.File, error) {
	return nil, os.MkdirAll(dir, 0o755)
}
