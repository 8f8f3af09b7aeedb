package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/edgeplat/edgeplat/config"

	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// fatalError ends Run instead of being retried: retrying cannot fix it,
// and an agent that keeps its API up while it retries looks alive to
// every probe but stores and publishes nothing.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

// isAccessError reports whether err says this process may not use a path
// (no permission, a read-only file system, a file where a directory is
// expected). Those need an operator; a missing disk or a full one may
// come back by itself and is retried.
func isAccessError(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOTDIR)
}

// dataDirError names the directory, the user and the setting that
// changes it; it is fatal when the cause is access.
func dataDirError(dir, what string, err error) error {
	e := fmt.Errorf("%s (or --data-dir) %s %s (uid %d): %w; give that user the directory or point %s at one it can write",
		config.Label("agent.data_dir"), dir, what, os.Geteuid(), err, config.EnvNames("agent.data_dir"))
	if isAccessError(err) {
		return &fatalError{err: e}
	}
	return e
}

// checkDataDir checks, before the store opens them, that the data
// directory and the store's files are this process's to write, so the
// error names the path and the fix.
func checkDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return dataDirError(dir, "cannot be created", err)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return dataDirError(dir, "is not writable", err)
	}
	name := f.Name()
	_ = f.Close()
	if err := os.Remove(name); err != nil {
		return dataDirError(dir, "is not writable", err)
	}
	// A store left by another user (a first run as root) is refused by
	// SQLite with a less helpful message.
	for _, sfx := range []string{"", "-wal", "-shm"} {
		p := filepath.Join(dir, store.FileName+sfx)
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return dataDirError(dir, "holds "+filepath.Base(p)+", which is not writable", err)
		}
		_ = f.Close()
	}
	return nil
}
