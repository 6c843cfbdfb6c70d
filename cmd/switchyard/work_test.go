package main

import (
	"strings"
	"testing"
)

// TestWorkBadConfig: bad values fail at once with a message naming the
// value, exit 2, before anything connects.
func TestWorkBadConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"coordinator", "run", "--shard", "0/2", "--nntp", "h:119"}, `"0/2"`},
		{[]string{"coordinator", "run", "--shard", "3/2", "--nntp", "h:119"}, `"3/2"`},
		{[]string{"coordinator", "run", "--shard", "x", "--nntp", "h:119"}, `"x"`},
		{[]string{"coordinator", "run", "--shard", "1/0", "--nntp", "h:119"}, `"1/0"`},
		{[]string{"coordinator", "run"}, "--nntp"},
		{[]string{"coordinator", "run", "--nntp", "nohost"}, `"nohost"`},
		{[]string{"coordinator", "run", "--nntp", "h:abc"}, `"abc"`},
		{[]string{"coordinator", "run", "--nntp", "[::1]"}, `"[::1]"`},
		{[]string{"coordinator", "run", "--nntp", ":119"}, `":119"`},
		{[]string{"coordinator", "run", "--nntp", "h:119", "--nntp-conns", "0"}, "--nntp-conns 0"},
		{[]string{"coordinator", "run", "--nntp", "h:119", "--groups", " , "}, "--groups"},
		{[]string{"coordinator", "run", "--nntp", "h:119", "--range-size", "0"}, "--range-size 0"},
		{[]string{"coordinator", "run", "--nntp", "h:119", "--source", "Bad Name"}, "Bad Name"},
		{[]string{"worker", "run", "--indexer", "nope"}, `"nope"`},
		{[]string{"worker", "run", "--lease-ttl", "-1s"}, "--lease-ttl"},
		{[]string{"work", "status", "--source", "UPPER"}, "UPPER"},
		{[]string{"up", "--workers", "-1"}, "--workers -1"},
		{[]string{"up", "--nntp-conns", "0"}, "--nntp-conns 0"},
	} {
		_, stderr, code := execute(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %s", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}
