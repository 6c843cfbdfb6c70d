//go:build unix

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// messages reads ws's messages, each decoded as a JSON object, into the
// returned channel, which is closed when the socket ends.
func messages(ws *websocket.Conn) <-chan map[string]any {
	out := make(chan map[string]any, 64)
	go func() {
		defer close(out)
		for {
			_, b, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			var m map[string]any
			if json.Unmarshal(b, &m) == nil {
				out <- m
			}
		}
	}()
	return out
}

// metric is the value of the series switchyard_NAME (labels included in
// NAME, as /metrics writes them) on the /metrics of the HTTP side at base
// (host:port); "" when it has none.
func metric(t *testing.T, base, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(body), "\nswitchyard_"+name+" ")
	v, _, _ := strings.Cut(rest, "\n")
	return v
}
