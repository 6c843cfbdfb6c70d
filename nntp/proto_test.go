package nntp

import (
	"testing"
	"time"
)

func TestParseOverview(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		line    string
		want    Overview
		wantErr bool
	}{
		{name: "full", line: "12\tSubj\tMe <me@x>\tDate\t<id@x>\t<ref@x>\t700000\t5400\tXref: h g:12",
			want: Overview{Number: 12, Subject: "Subj", From: "Me <me@x>", Date: "Date", MessageID: "<id@x>", References: "<ref@x>", Bytes: 700000, Lines: 5400, Extra: "Xref: h g:12"}},
		{name: "empty metadata", line: "3\ts\tf\td\t<m>\t\t\t",
			want: Overview{Number: 3, Subject: "s", From: "f", Date: "d", MessageID: "<m>"}},
		{name: "two extra fields", line: "3\ts\tf\td\t<m>\t\t1\t2\tXref: a b:3\tX-Other: y",
			want: Overview{Number: 3, Subject: "s", From: "f", Date: "d", MessageID: "<m>", Bytes: 1, Lines: 2, Extra: "Xref: a b:3\tX-Other: y"}},
		{name: "seven fields", line: "3\ts\tf\td\t<m>\t\t1", wantErr: true},
		{name: "bad number", line: "3a\ts\tf\td\t<m>\t\t1\t2", wantErr: true},
		{name: "zero number", line: "0\ts\tf\td\t<m>\t\t1\t2", wantErr: true},
		{name: "bad bytes", line: "3\ts\tf\td\t<m>\t\tmany\t2", wantErr: true},
		{name: "negative lines", line: "3\ts\tf\td\t<m>\t\t1\t-2", wantErr: true},
		{name: "no tab", line: "garbage", wantErr: true},
		{name: "largest number", line: "9223372036854775807\ts\tf\td\t<m>\t\t1\t2",
			want: Overview{Number: 9223372036854775807, Subject: "s", From: "f", Date: "d", MessageID: "<m>", Bytes: 1, Lines: 2}},
		{name: "number over 2^63-1", line: "9223372036854775808\ts\tf\td\t<m>\t\t1\t2", wantErr: true},
		{name: "number of 20 digits", line: "10000000000000000000\ts\tf\td\t<m>\t\t1\t2", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseOverview([]byte(tc.line))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && got != tc.want {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if x := (Overview{Extra: "X-A: 1\txref: h g:5"}).Xref(); x != "h g:5" {
		t.Fatalf("Xref() = %q", x)
	}
}

func TestParseStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line string
		code int
		msg  string
		ok   bool
	}{
		{"200 ready", 200, "ready", true},
		{"205", 205, "", true},
		{"2x0 x", 0, "", false},
		{"600 x", 0, "", false},
		{"20", 0, "", false},
		{"2000 x", 0, "", false},
	} {
		code, msg, err := ParseStatus([]byte(tc.line))
		if (err == nil) != tc.ok || code != tc.code || msg != tc.msg {
			t.Errorf("%q: %d %q %v", tc.line, code, msg, err)
		}
	}
}

// TestParseDate: the text of a 111 answer is the 14-digit UTC timestamp,
// then possibly a space and free text; nothing else is a timestamp.
// (Was: text after the timestamp, which RFC 3977 section 3.2 allows, was refused.)
func TestParseDate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		msg string
		ok  bool
	}{
		{"20240229235958", true},
		{"20240229235958 Server date and time", true},
		{"20240229235958 ", true},
		{"2024022923595", false},
		{"202402292359589", false},
		{"20240229235958x", false},
		{"+0240229235958", false},
		{"20230229000000", false}, // no February 29 in 2023
		{"20240229240000", false},
		{" 20240229235958", false},
		{"", false},
	} {
		got, err := parseDate(tc.msg)
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v, %v", tc.msg, got, err)
			continue
		}
		if want := time.Date(2024, 2, 29, 23, 59, 58, 0, time.UTC); tc.ok && (!got.Equal(want) || got.Location() != time.UTC) {
			t.Errorf("%q: %v, want %v", tc.msg, got, want)
		}
	}
}
