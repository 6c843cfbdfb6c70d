package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testnats"
)

func TestRequestMapsNoResponders(t *testing.T) {
	t.Parallel()
	_, nc := testnats.Start(t)
	_, err := bus.Request(context.Background(), nc, nats.NewMsg("nobody.home"))
	if !errors.Is(err, bus.ErrNoResponders) {
		t.Fatalf("err = %v, want ErrNoResponders", err)
	}
}

func TestRequestMapsTimeout(t *testing.T) {
	t.Parallel()
	_, nc := testnats.Start(t)
	// A subscriber that never answers: the request reaches it, then times out.
	got := make(chan struct{}, 1)
	sub, err := nc.Subscribe("silent", func(*nats.Msg) { got <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = bus.Request(ctx, nc, nats.NewMsg("silent"))
	if !errors.Is(err, bus.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	<-got
}

func TestRequestReply(t *testing.T) {
	t.Parallel()
	_, nc := testnats.Start(t)
	sub, err := nc.Subscribe("echo", func(m *nats.Msg) { _ = m.Respond(append([]byte("re:"), m.Data...)) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	msg := nats.NewMsg("echo")
	msg.Data = []byte("hi")
	reply, err := bus.Request(context.Background(), nc, msg)
	if err != nil {
		t.Fatal(err)
	}
	if string(reply.Data) != "re:hi" {
		t.Fatalf("reply %q", reply.Data)
	}
}

func TestURLPrefersFlagThenEnv(t *testing.T) {
	// Not parallel: t.Setenv changes the process environment.
	t.Setenv(bus.EnvURL, "nats://env:4222")
	if got := bus.URL("nats://flag:4222"); got != "nats://flag:4222" {
		t.Fatalf("flag: %q", got)
	}
	if got := bus.URL(""); got != "nats://env:4222" {
		t.Fatalf("env: %q", got)
	}
}

func TestSubjects(t *testing.T) {
	t.Parallel()
	if got := bus.APISubject("persist", "hub", "3"); got != "persist.hub.api.3" {
		t.Fatal(got)
	}
	for i, want := range []string{"persist", "hub", "id", ""} {
		if got := bus.SubjectToken("persist.hub.id", i); got != want {
			t.Errorf("token %d = %q, want %q", i, got, want)
		}
	}
}

func TestValidScope(t *testing.T) {
	t.Parallel()
	long := make([]byte, 129)
	for i := range long {
		long[i] = 'a'
	}
	cases := map[string]bool{
		"hub": true, "account-00000000-0000-4000-8000-000000000000": true, "a_b": true, "0": true,
		"": false, "-x": false, "_x": false, "Hub": false, "a.b": false, "a*": false, "a>": false, "ü": false,
		string(long): false, string(long[:128]): true,
	}
	for s, want := range cases {
		if got := bus.ValidScope(s); got != want {
			t.Errorf("ValidScope(%q) = %v, want %v", s, got, want)
		}
	}
}

// (Was: a connect error printed the URL as given, a password or token in
// it included.)
func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                     "nats://127.0.0.1:4222",
		"nats://alice:s3cret@10.0.0.5:4222":         "nats://alice:xxxxx@10.0.0.5:4222",
		"nats://T0KEN@10.0.0.5:4222":                "nats://xxxxx@10.0.0.5:4222",
		"nats://a:pw1@h1:4222,nats://b:pw2@h2:4222": "nats://a:xxxxx@h1:4222,nats://b:xxxxx@h2:4222",
		"tls://bob:p%40ss@host":                     "tls://bob:xxxxx@host",
		"not a url @ all":                           "not a url @ all",
	} {
		if got := bus.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
