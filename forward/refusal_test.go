package forward

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestRefusalsSayWhatIsWrong sends real signed batches, through a Sender, to
// a receiver (region "us", peers eu and ap) set up wrong in each of the ways
// an operator gets a region wrong, and checks the error the sending region
// logs names the cause, not only the status.
func TestRefusalsSayWhatIsWrong(t *testing.T) {
	t.Parallel()
	tr := newTestReceiver(t, func(c *ReceiverConfig) { c.Clock = nil })
	// A web server that is not a receiver, as a peer's web side is.
	web := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(web.Close)
	skewed := newFakeClock()
	skewed.now = time.Now().Add(10 * time.Minute)
	for _, tc := range []struct {
		name string
		cfg  SenderConfig
		code int
		want []string
		not  bool // the answer is not a receiver's
	}{
		{"sender not a peer of the receiver", SenderConfig{Self: "mx", Secret: secretEU}, 403,
			[]string{`unknown peer "mx"`, "holds no secret for it"}, false},
		{"secrets differ", SenderConfig{Self: "eu", Secret: secretAP}, 403,
			[]string{`the secret this receiver holds for "eu" is not the one`}, false},
		{"peer URL reaches another region", SenderConfig{Self: "eu", Secret: secretEU, Peers: map[string]string{"ap": tr.srv.URL}}, 403,
			[]string{`signed for another peer ("ap"; this receiver is "us")`, `URL for "ap" reaches another peer's receiver`}, false},
		{"clocks differ", SenderConfig{Self: "eu", Secret: secretEU, Clock: skewed}, 400,
			[]string{"outside the window", "the two clocks differ"}, false},
		{"peer URL is not a receiver", SenderConfig{Self: "eu", Secret: secretEU, Peers: map[string]string{"us": web.URL}}, 404,
			[]string{"not as a forward receiver", "check that the peer's URL is its receiver's"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cfg.Peers == nil {
				tc.cfg.Peers = map[string]string{"us": tr.srv.URL}
			}
			s := startSender(t, tc.cfg)
			var peer string
			for p := range tc.cfg.Peers {
				peer = p
			}
			err := s.Send(context.Background(), &Outbound{Peer: peer, Body: batchBody(tc.cfg.Self, del("s", "a"))})
			var se *StatusError
			if !errors.As(err, &se) || se.Code != tc.code || se.NotReceiver != tc.not {
				t.Fatalf("Send = %v (%+v), want a %d with NotReceiver %v", err, se, tc.code, tc.not)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Send = %v\nwant it to say %q", err, w)
				}
			}
		})
	}
}
