package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/events"
)

func TestRegionSecrets(t *testing.T) {
	long := strings.Repeat("x", minRegionSecret)
	got, err := parseRegionSecrets(strings.NewReader("# regions\n\neu=" + long + "\n us = " + long + "y \n"))
	if err != nil || string(got["eu"]) != long || string(got["us"]) != long+"y" || len(got) != 2 {
		t.Fatalf("parsed %q, %v", got, err)
	}
	for in, want := range map[string]string{
		"eu " + long:                  "want NAME=SECRET",
		"EU=" + long:                  "want NAME=SECRET",
		"eu=short":                    "shorter than 32",
		"eu=" + long + "\neu=" + long: "a second secret",
		"=" + long:                    "want NAME=SECRET",
	} {
		if _, err := parseRegionSecrets(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", in, err, want)
		}
	}
}

func TestRegionFlags(t *testing.T) {
	file := regionSecrets(t)
	ok := regionFlags{region: "eu", listen: "127.0.0.1:7001", secretsFile: file, peers: []string{"us=http://127.0.0.1:7002"}}
	ec, err := ok.config(false)
	if err != nil || ec.Peers["us"] != "http://127.0.0.1:7002" || len(ec.Secrets) != 2 || ec.Region != "eu" {
		t.Fatalf("config %+v, %v", ec, err)
	}
	for _, tc := range []struct {
		f    regionFlags
		want string
	}{
		{regionFlags{listen: "x:1"}, "give at least one --peer"},
		{regionFlags{peers: []string{"us=http://h:1"}}, "needs --region"},
		{regionFlags{region: "eu", listen: "h:9", secretsFile: file, peers: []string{"us"}}, "want NAME=URL"},
		{regionFlags{region: "eu", listen: "h:9", secretsFile: file, peers: []string{"us=ftp://h"}}, "not an http"},
		{regionFlags{region: "eu", listen: "h:9", secretsFile: file, peers: []string{"eu=http://h:1"}}, "that is this region"},
		{regionFlags{region: "eu", listen: "h:9", secretsFile: file, peers: []string{"us=http://h:1", "us=http://h:2"}}, "given twice"},
		{regionFlags{region: "eu", listen: "h:9", secretsFile: file, peers: []string{"ap=http://h:1"}}, `no secret for region "ap"`},
		{regionFlags{region: "eu", listen: "h:9", secretsFile: file + ".missing", peers: []string{"us=http://h:1"}}, "no such file"},
		{regionFlags{window: -time.Second}, "want 0 (none) or more"},
	} {
		_, err := tc.f.config(false)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.f, err, tc.want)
		}
	}
	for in, want := range map[time.Duration]time.Duration{0: events.NoCoalescing, 100 * time.Millisecond: 100 * time.Millisecond} {
		if ec, err := (&regionFlags{window: in}).config(false); err != nil || ec.Window != want {
			t.Errorf("--events-window %v: window %v, %v; want %v", in, ec.Window, err, want)
		}
	}
	var ue usageError
	if _, err := (&regionFlags{peers: []string{"x"}}).config(false); !errors.As(err, &ue) {
		t.Errorf("a bad flag is not a usage error: %v", err)
	}
}

// (Was: a secrets file any user could read was used without a word; its
// secrets sign batches every region accepts.)
func TestRegionSecretsFileMode(t *testing.T) {
	t.Parallel()
	file := regionSecrets(t)
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	f := regionFlags{region: "eu", listen: "127.0.0.1:7001", secretsFile: file, peers: []string{"us=http://127.0.0.1:7002"}}
	if _, err := f.config(false); err == nil || !strings.Contains(err.Error(), "chmod 600 "+file) || !strings.Contains(err.Error(), "--insecure-creds") {
		t.Fatalf("a secrets file of mode 0644: %v, want a refusal saying chmod 600 and --insecure-creds", err)
	}
	if ec, err := f.config(true); err != nil || len(ec.Secrets) != 2 {
		t.Fatalf("with --insecure-creds: %+v, %v", ec, err)
	}
}

// regionSecrets writes a --forward-secrets file for eu and us.
func regionSecrets(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "regions.secrets")
	long := strings.Repeat("s", minRegionSecret)
	if err := os.WriteFile(file, []byte("eu="+long+"\nus="+long+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestRegionNameChecked: --region must follow the rule of region names
// ([a-z0-9_-], 1-64, as in --peer and the secrets file), else a usage
// error naming --region. Before, it was not checked, and with --peer an
// upper-case name failed at run time blaming the secrets file ("no secret
// for region").
func TestRegionNameChecked(t *testing.T) {
	t.Parallel()
	args := []string{"events", "serve", "--http", "127.0.0.1:0", "--nats", deadNATS(t),
		"--region", "EU", "--forward-listen", "127.0.0.1:7001", "--peer", "us=http://127.0.0.1:7002", "--forward-secrets", regionSecrets(t)}
	_, stderr, code := execute(t, args...)
	wantUsage(t, args, stderr, code, "--region")
}

// TestForwardListenChecked: --forward-listen must be host:port with a port
// in 0-65535, else a usage error naming it. Before, it was not checked, and
// the command went on to connect and failed later.
func TestForwardListenChecked(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"nonsense", "127.0.0.1:99999"} {
		args := []string{"events", "serve", "--http", "127.0.0.1:0", "--nats", deadNATS(t),
			"--region", "eu", "--forward-listen", addr, "--peer", "us=http://127.0.0.1:7002", "--forward-secrets", regionSecrets(t)}
		_, stderr, code := execute(t, args...)
		wantUsage(t, args, stderr, code, "--forward-listen")
	}
}

// (Was: a --peer URL naming this region's own --forward-listen was taken, and its batches silently ignored by its own receiver: nothing logged or counted, the peer got nothing.)
func TestPeerIsOwnReceiverRefused(t *testing.T) {
	t.Parallel()
	secrets := regionSecrets(t)
	for _, tc := range []struct{ listen, peer string }{
		{"127.0.0.1:7001", "http://127.0.0.1:7001"},
		{"127.0.0.1:7001", "https://127.0.0.1:7001/"},
		{"0.0.0.0:7001", "http://localhost:7001"},
		{":7001", "http://127.0.0.1:7001"},
		{"[::1]:7001", "http://[::1]:7001"},
		{"10.0.0.7:7001", "http://10.0.0.7:7001"},
		{"127.0.0.1:80", "http://127.0.0.1"},
		{"127.0.0.1:443", "https://LOCALHOST"},
	} {
		args := []string{"events", "serve", "--http", "127.0.0.1:0", "--nats", deadNATS(t),
			"--region", "eu", "--forward-listen", tc.listen, "--peer", "us=" + tc.peer, "--forward-secrets", secrets}
		_, stderr, code := execute(t, args...)
		wantUsage(t, args, stderr, code, "--forward-listen")
	}
	// The same port on another machine is another region's receiver.
	for _, tc := range []struct{ listen, peer string }{
		{"0.0.0.0:7001", "http://10.1.0.7:7001"},
		{"10.0.0.7:7001", "http://10.1.0.7:7001"},
		{"127.0.0.1:7001", "http://127.0.0.1:7002"},
		{"127.0.0.1:0", "http://127.0.0.1:7001"},
	} {
		f := regionFlags{region: "eu", listen: tc.listen, secretsFile: secrets, peers: []string{"us=" + tc.peer}}
		if _, err := f.config(false); err != nil {
			t.Errorf("--forward-listen %s --peer us=%s: %v", tc.listen, tc.peer, err)
		}
	}
}

// FuzzRegionSecrets: no file content makes the parser panic, and what it
// accepts holds names and secrets in bounds.
func FuzzRegionSecrets(f *testing.F) {
	f.Add("eu=" + strings.Repeat("a", 40) + "\n# c\nus=" + strings.Repeat("b", 32))
	f.Fuzz(func(t *testing.T, in string) {
		got, err := parseRegionSecrets(strings.NewReader(in))
		if err != nil {
			return
		}
		for name, s := range got {
			if !validRegionName(name) || len(s) < minRegionSecret {
				t.Fatalf("accepted %q=%q", name, s)
			}
		}
	})
}
