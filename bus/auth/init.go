package auth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ConfFile is the name of the nats-server configuration Init writes.
const ConfFile = "nats-server.conf"

// CredsFile is the name of user name's creds file in an auth directory.
func CredsFile(dir, name string) string { return filepath.Join(dir, name+".creds") }

// Init writes the users of plan into dir: one creds file per user (named
// after the user, see CredsFile) and ConfFile for the NATS server, each
// readable by the owner only. Every user gets a fresh random password, or a
// fresh NKey when nkey is true. It refuses to overwrite an existing
// ConfFile, so credentials in use are never replaced by accident.
func Init(dir string, plan Plan, nkey bool) ([]User, error) {
	users, err := plan.Users()
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	existed := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("auth dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("auth dir: %w", err)
	}
	conf := filepath.Join(dir, ConfFile)
	if _, err := os.Stat(conf); err == nil {
		return nil, fmt.Errorf("%s exists: remove the directory's credentials first to make new ones", conf)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("auth dir: %w", err)
	}
	// MkdirAll leaves a directory that exists as it is: `mkdir auth` under
	// umask 022 made it 0755, which lists every user and tenant name to
	// every account. The credentials go only into a private one. An empty
	// directory is made private here; one that holds other files is not
	// Init's to change (`auth init .`, a shared config directory): it is
	// refused unless it is private already.
	if err := privateDir(dir, existed && len(entries) > 0); err != nil {
		return nil, err
	}
	logins := make([]Login, 0, len(users))
	for _, u := range users {
		l := Login{User: u}
		c := Creds{Inbox: u.Inbox}
		if nkey {
			if c.Seed, l.Nkey, err = NewNkey(); err != nil {
				return nil, err
			}
		} else {
			if l.Password, err = NewPassword(); err != nil {
				return nil, err
			}
			c.User, c.Password = u.Name, l.Password
		}
		if err := writeSecret(CredsFile(dir, u.Name), c.Marshal("switchyard bus credentials: "+describe(u))); err != nil {
			return nil, err
		}
		logins = append(logins, l)
	}
	// The configuration goes last: its presence says the set is complete.
	if err := writeSecret(conf, ServerConf(logins)); err != nil {
		return nil, err
	}
	return users, nil
}

// writeSecret writes data to a new file readable by its owner only.
func writeSecret(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// O_CREATE keeps an existing file's mode: make sure it is private.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// privateDir makes dir mode 0700, or, when it holds files of others
// (shared), checks that no one else can read or enter it.
func privateDir(dir string, shared bool) error {
	if !shared {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("auth dir: %w", err)
		}
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("auth dir: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("auth dir %s holds other files and is mode %04o: the credentials need a directory only their owner can read; use a new directory, or chmod 700 %s", dir, fi.Mode().Perm(), shellWord(dir))
	}
	return nil
}
