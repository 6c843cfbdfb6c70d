package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/switchyard-dev/switchyard/bus/auth"
)

// checkDataDir makes dir, the value of the directory flag flag (--data,
// --archive), if it is missing, and checks that it is a directory this
// process can write. A server only opens its files on the first request
// for them, so without this check a regular file or a read-only directory
// would let it start, report ready and then fail every write. Commands
// call it once every flag is checked, as it may create dir.
func checkDataDir(flag, dir string) error {
	if dir == "" {
		// Not "." by accident: a script's unset variable.
		return usagef("%s is empty: give a directory", flag)
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("%s %q: create: %w", flag, dir, err)
		}
	case err != nil:
		return fmt.Errorf("%s %q: %w", flag, dir, err)
	case !fi.IsDir():
		return fmt.Errorf("%s %q: not a directory", flag, dir)
	}
	// Writing a file is the one check that answers for permissions, a
	// read-only mount and root alike.
	f, err := os.CreateTemp(dir, ".switchyard-write-check-*")
	if err != nil {
		return fmt.Errorf("%s %q: not writable: %w", flag, dir, err)
	}
	name := f.Name()
	cerr := f.Close()
	if err := errors.Join(cerr, os.Remove(name)); err != nil {
		return fmt.Errorf("%s %q: write check: %w", flag, dir, err)
	}
	return nil
}

// checkDataDirs runs checkDataDir on --data and, if given, --archive.
// A flag naming something that is not a directory is refused before
// either is created, so a refused start leaves nothing behind.
func checkDataDirs(dataDir, archiveDir string) error {
	for _, d := range [...]struct{ flag, dir string }{{"--data", dataDir}, {"--archive", archiveDir}} {
		if fi, err := os.Stat(d.dir); d.dir != "" && err == nil && !fi.IsDir() {
			return fmt.Errorf("%s %q: not a directory", d.flag, d.dir)
		}
	}
	if err := checkDataDir("--data", dataDir); err != nil {
		return err
	}
	if archiveDir == "" {
		return nil
	}
	return checkDataDir("--archive", archiveDir)
}

// checkAuthDir checks that dir, the value of --auth, holds the
// nats-server.conf that switchyard auth init writes, before anything starts
// or is created: else the first role to read it failed in words that named
// neither --auth nor the fix ("http: read auth dir: error opening config
// file: ..."), and up had made its --data already.
func checkAuthDir(dir string) error {
	conf := filepath.Join(dir, auth.ConfFile)
	fi, err := os.Stat(conf)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("--auth %q: no %s in it: make the directory with switchyard auth init DIR", dir, auth.ConfFile)
	case err != nil:
		return fmt.Errorf("--auth %q: %w", dir, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("--auth %q: %s is not a file", dir, conf)
	}
	return nil
}
