package main

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/persist"
)

func TestParseDeleteSelector(t *testing.T) {
	t.Parallel()
	tooMany := make([]string, persist.MaxBatch+1)
	for i := range tooMany {
		tooMany[i] = strconv.Itoa(i + 1)
	}
	cases := []struct {
		name    string
		seqs    []string
		upTo    uint64
		upToSet bool
		all     bool
		want    persist.Delete
		wantErr string
	}{
		{name: "one seq", seqs: []string{"3"}, want: persist.Delete{Seqs: []uint64{3}}},
		{name: "seqs", seqs: []string{"3", "1", "7"}, want: persist.Delete{Seqs: []uint64{3, 1, 7}}},
		{name: "up to", upTo: 9, upToSet: true, want: persist.Delete{UpTo: 9}},
		{name: "all", all: true, want: persist.Delete{All: true}},

		{name: "nothing", wantErr: "say what to delete"},
		{name: "seqs and up-to", seqs: []string{"1"}, upTo: 5, upToSet: true, wantErr: "only one of"},
		{name: "seqs and all", seqs: []string{"1"}, all: true, wantErr: "only one of"},
		{name: "up-to and all", upTo: 5, upToSet: true, all: true, wantErr: "only one of"},
		{name: "up-to 0", upToSet: true, wantErr: "--up-to 0"},
		{name: "seq 0", seqs: []string{"0"}, wantErr: "positive integer"},
		{name: "not a seq", seqs: []string{"1", "x"}, wantErr: `SEQ "x"`},
		{name: "negative", seqs: []string{"-1"}, wantErr: "positive integer"},
		{name: "too many", seqs: tooMany, wantErr: "at most"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseDeleteSelector(c.seqs, c.upTo, c.upToSet, c.all)
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
				t.Fatalf("delete %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestStreamDelCommand deletes by seqs, up to a seq and all, checking what
// each prints and what stays, and refuses mixed selectors before sending.
func TestStreamDelCommand(t *testing.T) {
	t.Parallel()
	sy := startPersist(t)
	for i := 1; i <= 6; i++ {
		mustRun(t, sy, nil, "stream", "pub", "hub", "log", "m"+strconv.Itoa(i))
	}
	seqsIn := func() string {
		t.Helper()
		var seqs []string
		for _, line := range strings.Split(strings.TrimSpace(mustRun(t, sy, nil, "stream", "ls", "hub", "log")), "\n") {
			if line != "" {
				seqs = append(seqs, strings.SplitN(line, "\t", 2)[0])
			}
		}
		return strings.Join(seqs, ",")
	}

	// Seq 9 does not exist: it is skipped, not an error.
	if got := mustRun(t, sy, nil, "stream", "del", "hub", "log", "3", "1", "9"); got != "1\n3\n" && got != "3\n1\n" {
		t.Fatalf("del 3 1 9 printed %q, want seqs 1 and 3", got)
	}
	if got := seqsIn(); got != "2,4,5,6" {
		t.Fatalf("after del 3 1 9: seqs %s", got)
	}
	if got := mustRun(t, sy, nil, "stream", "del", "hub", "log", "--up-to", "4"); got != "2\n4\n" {
		t.Fatalf("del --up-to 4 printed %q", got)
	}
	if got := seqsIn(); got != "5,6" {
		t.Fatalf("after --up-to 4: seqs %s", got)
	}
	// Mixed selectors are usage errors and delete nothing.
	for _, args := range [][]string{
		{"5", "--all"},
		{"5", "--up-to", "6"},
		{"--up-to", "6", "--all"},
		{},
	} {
		full := append([]string{"stream", "del", "hub", "log"}, args...)
		if out, stderr, code := sy(nil, full...); code != exitUsage || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and no output", args, code, out, stderr, exitUsage)
		}
	}
	if got := seqsIn(); got != "5,6" {
		t.Fatalf("after refused deletes: seqs %s", got)
	}
	if got := mustRun(t, sy, nil, "stream", "del", "hub", "log", "--all"); got != "5\n6\n" {
		t.Fatalf("del --all printed %q", got)
	}
	if got := seqsIn(); got != "" {
		t.Fatalf("after --all: seqs %s", got)
	}
	if got := mustRun(t, sy, nil, "stream", "del", "hub", "log", "--all"); got != "" {
		t.Fatalf("del --all of an empty stream printed %q", got)
	}
	// Seqs are not reused after a delete, as the help says.
	if got := strings.TrimSpace(mustRun(t, sy, nil, "stream", "pub", "hub", "log", "m7")); got != "7" {
		t.Fatalf("pub after del --all got seq %s, want 7", got)
	}
}
