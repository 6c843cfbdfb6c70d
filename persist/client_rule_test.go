package persist_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/placement"
)

// questions counts the owner questions sent to the balancer, seen by a
// plain (not queued) subscription beside it.
type questions struct {
	t   *testing.T
	nc  *nats.Conn
	sub *nats.Subscription
}

func watchQuestions(t *testing.T, env *testpersist.Env) *questions {
	t.Helper()
	nc := env.Conn()
	sub, err := nc.SubscribeSync("persist.*.id")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &questions{t: t, nc: nc, sub: sub}
}

// count is the questions asked so far: the NATS server hands a request to
// every subscriber as it routes it, so after a round trip on this
// connection every question sent before is pending here.
func (q *questions) count() int {
	q.t.Helper()
	if err := q.nc.Flush(); err != nil {
		q.t.Fatal(err)
	}
	n, _, err := q.sub.Pending()
	if err != nil {
		q.t.Fatal(err)
	}
	return n
}

// setIn writes one value in each scope and reads it back.
func setIn(t *testing.T, c *persist.Client, scopes []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, scope := range scopes {
		kv := c.KV(scope, "rule")
		if _, err := kv.Set(ctx, "k", []byte(scope), persist.SetOptions{}); err != nil {
			t.Fatalf("set in %s: %v", scope, err)
		}
		e, err := kv.Get(ctx, "k")
		if err != nil || string(e.Value) != scope {
			t.Fatalf("get in %s: %v, %v", scope, e, err)
		}
	}
}

func scopeNames(prefix string, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return s
}

// TestClientPlacesScopesByTheRule: the balancer's first answer states its
// rule, and the client places every other scope itself: 40 scopes spread
// over three servers cost one question, and each write lands on its owner
// (a wrong one would refuse it and the client ask again). A balancer whose
// rule has no name is asked per scope, as before.
func TestClientPlacesScopesByTheRule(t *testing.T) {
	t.Parallel()
	t.Run("named rule", func(t *testing.T) {
		t.Parallel()
		env := testpersist.Start(t, 3)
		q := watchQuestions(t, env)
		scopes := scopeNames("named", 40)
		setIn(t, env.Client(), scopes)
		if n := q.count(); n != 1 {
			t.Fatalf("%d owner questions for %d scopes, want 1", n, len(scopes))
		}
		owners := map[string]bool{}
		for _, s := range scopes {
			owners[placement.Rendezvous(env.IDs, s)] = true
		}
		if len(owners) != 3 {
			t.Fatalf("the scopes are on %d servers, want all 3 (the test needs scopes that spread)", len(owners))
		}
	})
	t.Run("unnamed rule", func(t *testing.T) {
		t.Parallel()
		// The servers' own rule, behind a name the client cannot know.
		unnamed := func(ids []string, scope string) string { return placement.Rendezvous(ids, scope) }
		env := testpersist.Start(t, 3, testpersist.BalancerPlacement(unnamed))
		q := watchQuestions(t, env)
		scopes := scopeNames("unnamed", 10)
		c := env.Client()
		setIn(t, c, scopes)
		setIn(t, c, scopes) // cached per scope: no more questions
		if n := q.count(); n != len(scopes) {
			t.Fatalf("%d owner questions for %d scopes, want one per scope", n, len(scopes))
		}
	})
}

// TestClientRuleFollowsTheFleet: a rule that no longer matches the fleet
// (here: a balancer that stated modulo, replaced by the servers' own
// rendezvous) costs one refused request: the wrong owner says so, the
// client drops the rule, asks the balancer, learns its rule now, and goes
// on placing by it.
func TestClientRuleFollowsTheFleet(t *testing.T) {
	t.Parallel()
	env := testpersist.Start(t, 3, testpersist.WithoutBalancer())
	ids := env.IDs
	// The first scope is one both rules place alike, the second one they
	// place apart.
	var same, apart string
	for i := 0; same == "" || apart == ""; i++ {
		s := fmt.Sprintf("scope-%d", i)
		if placement.Modulo(ids, s) == placement.Rendezvous(ids, s) {
			same = cmp(same, s)
		} else {
			apart = cmp(apart, s)
		}
	}
	stale := env.Conn()
	sub, err := stale.Subscribe("persist.*.id", func(m *nats.Msg) {
		scope := strings.Split(m.Subject, ".")[1]
		_ = m.RespondMsg(&nats.Msg{Subject: m.Reply, Data: []byte(placement.Modulo(ids, scope)),
			Header: nats.Header{bus.HdrPlacement: {placement.NameModulo}, bus.HdrIDs: {strings.Join(ids, ",")}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := stale.Flush(); err != nil {
		t.Fatal(err)
	}
	c := env.Client()
	setIn(t, c, []string{same}) // learns modulo
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	env.StartBalancer()
	q := watchQuestions(t, env)
	setIn(t, c, []string{apart}) // placed by modulo: refused, then asked
	if n := q.count(); n != 1 {
		t.Fatalf("%d owner questions after the wrong owner, want 1", n)
	}
	setIn(t, c, scopeNames("after", 20))
	if n := q.count(); n != 1 {
		t.Fatalf("%d owner questions in all, want 1: the client should place by the rule it learnt again", n)
	}
}

// cmp is a, or b when a is empty.
func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
