package bench

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-dev/switchyard/bus"
)

// TestKeysTimedGetsLookNothingUp: the timed gets of bench persist --keys
// are gets alone: each get client's JetStream KV handle (a stream info
// request) and each persist client's owner of the scope (a balancer
// request) are had before the clock starts. Both sides run on one
// embedded NATS server with a persist server and a balancer (the bench
// runs them as processes; the requests are the same), and a subscriber
// counts those lookups while randomGets runs. (Was: JetStream's handles
// were made on each client's first timed get, and persist's get clients
// past the loaders asked the balancer on theirs, so a lookup round trip
// was in the first get of each client, in the p99 of small --gets.)
func TestKeysTimedGetsLookNothingUp(t *testing.T) {
	env, err := StartPersistEnv(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	ctx := t.Context()
	cfg := KeysConfig{Keys: 200, Batch: 50, Gets: 64}.withDefaults()
	conns := max(cfg.Loaders, cfg.GetClients)
	for _, side := range []struct {
		name   string
		lookup string // the subject of the lookup a first request would make
		ops    func(*keysSide) error
	}{
		{"persist", bus.IDSubject(bus.DefaultService, keysScope), func(s *keysSide) error {
			return persistKeysOps(ctx, s, env.NATS.ClientURL(), conns)
		}},
		{"JetStream", "$JS.API.STREAM.INFO.KV_" + keysBucket, func(s *keysSide) error {
			jss := make([]jetstream.JetStream, conns)
			for i := range jss {
				nc, err := env.Conn()
				if err != nil {
					return err
				}
				if jss[i], err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(cfg.Batch)); err != nil {
					return err
				}
			}
			return jetStreamKeysOps(ctx, s, jss)
		}},
	} {
		s := &keysSide{name: side.name, close: func() {}}
		if err := side.ops(s); err != nil {
			t.Fatalf("%s: %v", side.name, err)
		}
		t.Cleanup(func() { s.close() })
		if _, loaded, _, first := loadKeys(ctx, cfg, s); loaded != cfg.Keys {
			t.Fatalf("%s: %d of %d keys loaded: %s", side.name, loaded, cfg.Keys, first)
		}
		spy, err := env.Conn()
		if err != nil {
			t.Fatal(err)
		}
		sub, err := spy.SubscribeSync(side.lookup)
		if err != nil {
			t.Fatal(err)
		}
		if err := spy.Flush(); err != nil {
			t.Fatal(err)
		}
		var out KeysSide
		lat, _ := randomGets(ctx, cfg, s, &out)
		if len(lat) != cfg.Gets || out.GetErrors != 0 {
			t.Fatalf("%s: %d of %d gets, %d errors (%s)", side.name, len(lat), cfg.Gets, out.GetErrors, out.GetError)
		}
		// The server queued any lookup to the spy before it answered it,
		// so before the spy's own flush is answered.
		if err := spy.Flush(); err != nil {
			t.Fatal(err)
		}
		if n, _, _ := sub.Pending(); n != 0 {
			t.Errorf("%s: %d lookups on %s during the timed gets of %d clients; want none (made before the clock starts)", side.name, n, side.lookup, cfg.GetClients)
		}
	}
}
