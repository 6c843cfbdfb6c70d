package persist_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/persist"
)

// TestOwnerChecksTheBalancersAnswer: the client takes from the balancer
// only an owner it can use. A refusal in the error form is that error; an
// answer that is not a subject token, or (when the client knows the fleet's
// ids) not one of them, fails with a message that says so.
func TestOwnerChecksTheBalancersAnswer(t *testing.T) {
	t.Parallel()
	_, nc := testnats.Start(t)
	// A stand-in balancer: the scope says what it answers.
	answers := map[string]*nats.Msg{
		"member":   {Data: []byte("1")},
		"stranger": {Data: []byte("7")},
		"wildcard": {Data: []byte("*")},
		"dotted":   {Data: []byte("0.x")},
		"refused":  {Header: nats.Header{persist.HdrError: []string{string(persist.CodeBadRequest)}}, Data: []byte("invalid scope")},
		"unknown":  {Header: nats.Header{persist.HdrError: []string{"no-such-code"}}, Data: []byte("?")},
	}
	sub, err := nc.Subscribe("persist.*.id", func(m *nats.Msg) {
		a := answers[strings.Split(m.Subject, ".")[1]]
		_ = m.RespondMsg(&nats.Msg{Subject: m.Reply, Header: a.Header, Data: a.Data})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	withIDs, err := persist.NewClient(persist.ClientConfig{Conn: nc, IDs: []string{"0", "1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer withIDs.Close()
	anyID, err := persist.NewClient(persist.ClientConfig{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	defer anyID.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name  string
		c     *persist.Client
		scope string
		want  string       // the owner, when it is accepted
		code  persist.Code // the code of the error, when it has one
		inErr string       // in the error, when refused
	}{
		{"member", withIDs, "member", "1", "", ""},
		{"any id without a member list", anyID, "stranger", "7", "", ""},
		{"not a member", withIDs, "stranger", "", "", `"7" as the owner of scope "stranger", which is not one of the servers`},
		{"wildcard", anyID, "wildcard", "", "", "not a subject token"},
		{"two tokens", anyID, "dotted", "", "", "not a subject token"},
		{"refusal", anyID, "refused", "", persist.CodeBadRequest, "invalid scope"},
		{"unknown code", anyID, "unknown", "", persist.CodeInternal, "no-such-code"},
	} {
		id, err := tc.c.Owner(ctx, tc.scope)
		if tc.want != "" {
			if err != nil || id != tc.want {
				t.Errorf("%s: Owner = %q, %v; want %q", tc.name, id, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.inErr) || (tc.code != "" && persist.CodeOf(err) != tc.code) {
			t.Errorf("%s: Owner = %q, %v; want an error with %q (code %q)", tc.name, id, err, tc.inErr, tc.code)
		}
	}
	// A refused owner is not cached, and requests fail with the reason.
	if _, err := withIDs.Stream("stranger", "s").Get(ctx, 1); err == nil || !strings.Contains(err.Error(), "not one of the servers") {
		t.Fatalf("get in a scope the balancer places on a stranger: %v", err)
	}
}
