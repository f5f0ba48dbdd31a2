package testbed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// CheckWritable makes sure a file can be created at path, without leaving
// anything behind: the directory must exist, and path must not be a directory.
// The CLI checks every output path with it before it makes a namespace.
func CheckWritable(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return errors.New("is a directory")
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("directory %s: %w", dir, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".tcpwheel-probe-*")
	if err != nil {
		return fmt.Errorf("cannot create files in %s: %w", dir, errors.Unwrap(err))
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
