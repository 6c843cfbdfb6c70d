package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/usenet/users"
)

// TestUsenetUsersCommands: add prints a key (alone on stdout) that the
// store accepts and does not hold in clear; list shows limits and today's
// counts but no key; limits changes one limit and keeps the other; reset
// prints a new key and the old one stops working; remove, and every
// command on a missing user, exits 3; registration opens and closes.
func TestUsenetUsersCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := "--data=" + dir
	ctx := context.Background()

	out, stderr, code := execute(t, "usenet", "users", "add", "alice", "--requests-per-day", "100", "--grabs-per-day", "10", data)
	key := strings.TrimSpace(out)
	if code != 0 || len(key) != 32 || !strings.Contains(stderr, "shown only now") {
		t.Fatalf("add: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if _, stderr, code := execute(t, "usenet", "users", "add", "alice", data); code != exitRuntime || !strings.Contains(stderr, "already exists") {
		t.Fatalf("add twice: exit %d, %q", code, stderr)
	}
	s, err := users.Open(filepath.Join(dir, users.File), users.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Request(ctx, key); err != nil {
		t.Fatalf("the printed key: %v", err)
	}

	out, _, code = execute(t, "usenet", "users", "list", data)
	if code != 0 || !strings.Contains(out, "alice") || !strings.Contains(out, "REQUESTS TODAY") || strings.Contains(out, key) {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	if f := strings.Fields(strings.Split(out, "\n")[1]); len(f) < 5 || f[1] != "100" || f[2] != "10" || f[3] != "1" || f[4] != "0" {
		t.Fatalf("list row %q: want limits 100 and 10, 1 request and 0 grabs today", f)
	}

	if out, _, code := execute(t, "usenet", "users", "limits", "alice", "--grabs-per-day", "0", data); code != 0 || !strings.Contains(out, "requests/day 100, grabs/day unlimited") {
		t.Fatalf("limits: exit %d, %q", code, out)
	}

	out, _, code = execute(t, "usenet", "users", "reset", "alice", data)
	newKey := strings.TrimSpace(out)
	if code != 0 || len(newKey) != 32 || newKey == key {
		t.Fatalf("reset: exit %d, %q", code, out)
	}
	if ok, _ := s.Valid(ctx, key); ok {
		t.Fatal("the old key works after reset")
	}
	if ok, _ := s.Valid(ctx, newKey); !ok {
		t.Fatal("the new key does not work")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		if bytes.Contains(b, []byte(key)) || bytes.Contains(b, []byte(newKey)) {
			t.Fatalf("%s holds a key in clear", e.Name())
		}
	}

	for _, args := range [][]string{
		{"remove", "bob"}, {"reset", "bob"}, {"limits", "bob", "--requests-per-day", "1"},
	} {
		if _, stderr, code := execute(t, append(append([]string{"usenet", "users"}, args...), data)...); code != exitNotFound || !strings.Contains(stderr, "no such user") {
			t.Errorf("%v: exit %d, %q; want %d, no such user", args, code, stderr, exitNotFound)
		}
	}
	if out, _, code := execute(t, "usenet", "users", "remove", "alice", data); code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("remove: exit %d, %q", code, out)
	}
	if ok, _ := s.Valid(ctx, newKey); ok {
		t.Fatal("a removed user's key works")
	}
	if out, _, _ := execute(t, "usenet", "users", "list", data); !strings.Contains(out, "no users") {
		t.Fatalf("list after remove: %q", out)
	}

	if out, _, code := execute(t, "usenet", "users", "registration", data); code != 0 || strings.TrimSpace(out) != "registration closed" {
		t.Fatalf("registration by default: exit %d, %q", code, out)
	}
	if out, _, code := execute(t, "usenet", "users", "registration", "open", "--requests-per-day", "50", data); code != 0 || !strings.Contains(out, "open") || !strings.Contains(out, "requests/day 50, grabs/day unlimited") {
		t.Fatalf("registration open: exit %d, %q", code, out)
	}
	if r, err := s.Registration(ctx); err != nil || !r.Open || r.RequestsPerDay != 50 {
		t.Fatalf("the store says %+v, %v", r, err)
	}
	if out, _, code := execute(t, "usenet", "users", "registration", "closed", data); code != 0 || strings.TrimSpace(out) != "registration closed" {
		t.Fatalf("registration closed: exit %d, %q", code, out)
	}
}

// TestUsenetUsersBadInput: bad names, limits and arguments exit 2 naming
// what is wrong; a --data without a store is a run-time error naming it.
func TestUsenetUsersBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := "--data=" + dir
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"add"}, "NAME"},
		{[]string{"add", "a b"}, `"a b"`},
		{[]string{"add", "alice", "--requests-per-day", "-1"}, "--requests-per-day -1"},
		{[]string{"limits", "alice"}, "--requests-per-day, --grabs-per-day"},
		{[]string{"registration", "maybe"}, `"maybe"`},
		{[]string{"registration", "closed", "--grabs-per-day", "3"}, "registration open"},
	} {
		_, stderr, code := execute(t, append(append([]string{"usenet", "users"}, tc.args...), data)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want %d naming %s", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
	missing := filepath.Join(dir, "nowhere")
	if _, stderr, code := execute(t, "usenet", "users", "list", "--data", missing); code != exitRuntime || !strings.Contains(stderr, "check --data") {
		t.Fatalf("list in a directory without a store: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("list created the directory it did not find")
	}
}

// TestRegistrationShowRefusesLimits: registration without open or closed
// only shows the setting, so it refuses --requests-per-day and
// --grabs-per-day as a usage error, as registration closed does. Before,
// it ignored them and exited 0, as if the limits had been set.
func TestRegistrationShowRefusesLimits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, stderr, code := execute(t, "usenet", "users", "add", "alice", "--data", dir); code != 0 {
		t.Fatalf("users add: exit %d: %s", code, stderr)
	}
	for _, limit := range []string{"--requests-per-day", "--grabs-per-day"} {
		args := []string{"usenet", "users", "registration", limit, "500", "--data", dir}
		_, stderr, code := execute(t, args...)
		wantUsage(t, args, stderr, code, "registration open")
	}
}

// TestUsersAddSaysWhichStore: add names the store it wrote, and a store it
// made where no API has run (no admin key file) comes with a note naming
// up's directory. Before, with up running, the README's
// 'usenet users add alice' wrote ./switchyard-usenet/users.db, which up's
// API (./switchyard-data/_usenet-api) never reads, said only "user alice
// added", and alice's key was refused with error 100.
func TestUsersAddSaysWhichStore(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		apiKey bool // an API has run in the directory
		note   bool
	}{
		{"a directory no API has used", false, true},
		{"an API's directory", true, false},
	} {
		dir := t.TempDir()
		if c.apiKey {
			if err := os.WriteFile(filepath.Join(dir, "apikey"), []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		_, stderr, code := execute(t, "usenet", "users", "add", "alice", "--data", dir)
		if code != 0 || !strings.Contains(stderr, "added to "+filepath.Join(dir, users.File)) {
			t.Errorf("%s: add: exit %d, stderr %q; want it to name the store", c.name, code, stderr)
		}
		if got := strings.Contains(stderr, "no API has used") && strings.Contains(stderr, "switchyard-data/_usenet-api"); got != c.note {
			t.Errorf("%s: note about up's directory = %v, want %v; stderr %q", c.name, got, c.note, stderr)
		}
		// A store that exists is not new, whatever the directory holds.
		_, stderr, code = execute(t, "usenet", "users", "add", "bob", "--data", dir)
		if code != 0 || strings.Contains(stderr, "no API has used") {
			t.Errorf("%s: second add: exit %d, stderr %q; want no note", c.name, code, stderr)
		}
	}
}
