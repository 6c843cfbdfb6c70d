package main

import (
	"encoding/json"
	"errors"
	"maps"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

func TestParseConfigSets(t *testing.T) {
	t.Parallel()
	ptr := func(v int64) *int64 { return &v }
	dur := func(d time.Duration) *time.Duration { return &d }
	str := func(s string) *string { return &s }
	yes, no := true, false
	cases := []struct {
		name    string
		sets    []string
		want    persist.ConfigUpdate
		wantErr string // in the usage error; empty means success
	}{
		{name: "none", sets: nil, want: persist.ConfigUpdate{}},
		{name: "max_msgs", sets: []string{"max_msgs=100"}, want: persist.ConfigUpdate{MaxMsgs: ptr(100)}},
		{name: "unlimited", sets: []string{"max_bytes=-1"}, want: persist.ConfigUpdate{MaxBytes: ptr(-1)}},
		{name: "every limit", sets: []string{"max_msg_size=4096", "max_msgs_per_second=10", "max_bytes_per_second=0"},
			want: persist.ConfigUpdate{MaxMsgSize: ptr(4096), MaxMsgsPerSecond: ptr(10), MaxBytesPerSecond: ptr(0)}},
		{name: "max_age duration", sets: []string{"max_age=24h"}, want: persist.ConfigUpdate{MaxAge: dur(24 * time.Hour)}},
		{name: "max_age compound", sets: []string{"max_age=1m30s"}, want: persist.ConfigUpdate{MaxAge: dur(90 * time.Second)}},
		{name: "max_age millis", sets: []string{"max_age=90000"}, want: persist.ConfigUpdate{MaxAge: dur(90 * time.Second)}},
		{name: "max_age zero is forever", sets: []string{"max_age=0"}, want: persist.ConfigUpdate{MaxAge: dur(0)}},
		{name: "discard new", sets: []string{"discard_policy=new"}, want: persist.ConfigUpdate{DiscardPolicy: str("new")}},
		{name: "bools", sets: []string{"allow_msg_ttl=true", "sync=false"}, want: persist.ConfigUpdate{AllowMsgTTL: &yes, Sync: &no}},
		{name: "desc keeps = and commas", sets: []string{"desc=a=b, c"}, want: persist.ConfigUpdate{Desc: str("a=b, c")}},
		{name: "desc empty", sets: []string{"desc="}, want: persist.ConfigUpdate{Desc: str("")}},
		{name: "several", sets: []string{"max_msgs=1000", "max_age=90s", "discard_policy=old"},
			want: persist.ConfigUpdate{MaxMsgs: ptr(1000), MaxAge: dur(90 * time.Second), DiscardPolicy: str("old")}},

		{name: "unknown key", sets: []string{"max_messages=5"}, wantErr: `unknown key "max_messages"`},
		{name: "Go field name is not a key", sets: []string{"MaxMsgs=5"}, wantErr: "unknown key"},
		{name: "no equals", sets: []string{"max_msgs"}, wantErr: "want KEY=VALUE"},
		{name: "not a number", sets: []string{"max_msgs=lots"}, wantErr: "integer >= -1"},
		{name: "below -1", sets: []string{"max_msgs=-2"}, wantErr: "integer >= -1"},
		{name: "empty limit", sets: []string{"max_bytes="}, wantErr: "integer"},
		{name: "bad duration", sets: []string{"max_age=1d"}, wantErr: "duration"},
		{name: "negative duration", sets: []string{"max_age=-5s"}, wantErr: "negative"},
		{name: "negative millis", sets: []string{"max_age=-5"}, wantErr: "out of range"},
		{name: "millis beyond a Duration", sets: []string{"max_age=" + strconv.FormatInt(math.MaxInt64/1000, 10)}, wantErr: "out of range"},
		{name: "sub-millisecond", sets: []string{"max_age=1500us"}, wantErr: "whole number of milliseconds"},
		{name: "bad policy", sets: []string{"discard_policy=newest"}, wantErr: `want "old" or "new"`},
		{name: "bad bool", sets: []string{"allow_msg_ttl=yes"}, wantErr: "true or false"},
		{name: "twice", sets: []string{"max_msgs=1", "max_msgs=2"}, wantErr: "set twice"},
		{name: "desc at its limit", sets: []string{"desc=" + strings.Repeat("d", persist.MaxDescBytes)}, want: persist.ConfigUpdate{Desc: str(strings.Repeat("d", persist.MaxDescBytes))}},
		{name: "desc over its limit", sets: []string{"desc=" + strings.Repeat("d", persist.MaxDescBytes+1)}, wantErr: "over the limit of 4096"},
		{name: "desc not UTF-8", sets: []string{"desc=a\xffb"}, wantErr: "not valid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseConfigSets(c.sets)
			if c.wantErr != "" {
				var ue usageError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want a usage error mentioning %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(c.want)
				t.Fatalf("update %s, want %s", gj, wj)
			}
		})
	}
}

// TestConfigKeysAreTheWireNames: every --set key is a field of the wire
// form and every field of the wire form has a key, so a field added to
// persist.Config shows up here until the CLI learns it.
func TestConfigKeysAreTheWireNames(t *testing.T) {
	t.Parallel()
	cfg := persist.DefaultConfig()
	cfg.Desc = "x" // desc is left out of the JSON when empty
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wire map[string]any
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	for _, k := range configKeys {
		if _, ok := wire[k.name]; !ok {
			t.Errorf("--set key %q is not in the wire form %s", k.name, b)
		}
		delete(wire, k.name)
	}
	for name := range wire {
		t.Errorf("wire field %q has no --set key", name)
	}
}

// TestStreamConfigCommand reads a stream's config, changes it with repeated
// --set flags (enabling per-message TTLs, which stream pub --ttl needs, and a
// limit the stream applies at once), and refuses bad keys and values as usage
// errors that change nothing.
func TestStreamConfigCommand(t *testing.T) {
	t.Parallel()
	sy := startPersist(t)
	config := func(out string) persist.Config {
		t.Helper()
		var cfg persist.Config
		if err := json.Unmarshal([]byte(out), &cfg); err != nil {
			t.Fatalf("config output %q: %v", out, err)
		}
		return cfg
	}

	if got := config(mustRun(t, sy, nil, "stream", "config", "hub", "log")); got != persist.DefaultConfig() {
		t.Fatalf("new stream config %+v, want the defaults %+v", got, persist.DefaultConfig())
	}
	for i := range 3 {
		mustRun(t, sy, nil, "stream", "pub", "hub", "log", "m"+strconv.Itoa(i))
	}
	// The stream refuses TTLs until allow_msg_ttl is on.
	if _, stderr, code := sy(nil, "stream", "pub", "hub", "log", "short-lived", "--ttl", "1h"); code != exitRuntime {
		t.Fatalf("pub --ttl before allow_msg_ttl: exit %d (%s), want %d", code, stderr, exitRuntime)
	}

	out := mustRun(t, sy, nil, "stream", "config", "hub", "log",
		"--set", "max_msgs=2", "--set", "max_age=24h", "--set", "allow_msg_ttl=true", "--set", "desc=audit, kept a day")
	want := persist.DefaultConfig()
	want.MaxMsgs, want.MaxAge, want.AllowMsgTTL, want.Desc = 2, 24*time.Hour, true, "audit, kept a day"
	if got := config(out); got != want {
		t.Fatalf("after --set: %+v, want %+v", got, want)
	}
	if !strings.Contains(out, `"max_age": 86400000`) {
		t.Errorf("max_age is not printed in milliseconds: %s", out)
	}
	if got := config(mustRun(t, sy, nil, "stream", "config", "hub", "log")); got != want {
		t.Fatalf("read back %+v, want %+v", got, want)
	}
	// max_msgs=2 removed the oldest message at once.
	if ls := mustRun(t, sy, nil, "stream", "ls", "hub", "log"); strings.Contains(ls, "m0") || !strings.Contains(ls, "m1") || !strings.Contains(ls, "m2") {
		t.Fatalf("after max_msgs=2, ls = %q", ls)
	}
	mustRun(t, sy, nil, "stream", "pub", "hub", "log", "short-lived", "--ttl", "1h")
	// Plain milliseconds work too.
	if got := config(mustRun(t, sy, nil, "stream", "config", "hub", "log", "--set", "max_age=90000")); got.MaxAge != 90*time.Second {
		t.Fatalf("max_age=90000 gave %s, want 1m30s", got.MaxAge)
	}
	want.MaxAge = 90 * time.Second

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown key", []string{"--set", "max_msgs=5", "--set", "max_messages=5"}, `unknown key "max_messages"`},
		{"bad value", []string{"--set", "max_msgs=5", "--set", "discard_policy=drop"}, "discard_policy"},
		{"no value", []string{"--set", "sync"}, "KEY=VALUE"},
	} {
		args := append([]string{"stream", "config", "hub", "log"}, c.args...)
		if _, stderr, code := sy(nil, args...); code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d mentioning %q", c.name, code, stderr, exitUsage, c.want)
		}
	}
	// The refused invocations changed nothing, not even their valid --set.
	if got := config(mustRun(t, sy, nil, "stream", "config", "hub", "log")); got != want {
		t.Fatalf("after refused --set: %+v, want %+v", got, want)
	}
}

// TestKVSetTTL sets a value with a TTL through kv set and reads the TTL
// back from stream ls --json.
// (Was: kv set had no --ttl, and stream ls --json dropped every message's TTL.)
func TestKVSetTTL(t *testing.T) {
	t.Parallel()
	sy := startPersist(t)
	if _, stderr, code := sy(nil, "kv", "set", "hub", "sessions", "s-1", "alice", "--ttl", "-1s"); code != exitUsage || !strings.Contains(stderr, "--ttl") {
		t.Fatalf("kv set --ttl -1s: exit %d (%s), want %d naming --ttl", code, stderr, exitUsage)
	}
	mustRun(t, sy, nil, "kv", "set", "hub", "sessions", "s-0", "bob") // creates the stream
	if _, stderr, code := sy(nil, "kv", "set", "hub", "sessions", "s-1", "alice", "--ttl", "30m"); code != exitRuntime || !strings.Contains(stderr, "ttl") {
		t.Fatalf("kv set --ttl before allow_msg_ttl: exit %d (%s), want %d", code, stderr, exitRuntime)
	}
	mustRun(t, sy, nil, "stream", "config", "hub", "sessions", "--set", "allow_msg_ttl=true")
	mustRun(t, sy, nil, "kv", "set", "hub", "sessions", "s-1", "alice", "--ttl", "30m")
	if got := strings.TrimSpace(mustRun(t, sy, nil, "kv", "get", "hub", "sessions", "s-1")); got != "alice" {
		t.Fatalf("kv get s-1 = %q, want alice", got)
	}
	ttls := map[string]int64{}
	for line := range strings.SplitSeq(strings.TrimSpace(mustRun(t, sy, nil, "stream", "ls", "hub", "sessions", "--json")), "\n") {
		var l struct {
			Key string `json:"key"`
			TTL *int64 `json:"ttl"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("ls --json line %q: %v", line, err)
		}
		if l.TTL != nil {
			ttls[l.Key] = *l.TTL
		}
	}
	if want := map[string]int64{"s-1": 30 * 60 * 1000}; !maps.Equal(ttls, want) {
		t.Fatalf("ls --json TTLs %v, want %v (s-0 has none)", ttls, want)
	}
}
