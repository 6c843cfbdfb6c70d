package nntp

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testinn2"
	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// TestINN2 posts articles to a real INN2 server and reads them back with
// GROUP and OVER. `make test` starts INN2 through scripts/inn2.sh and sets
// SWITCHYARD_INN2_ADDR; without it the test skips (fails under CI=true).
func TestINN2(t *testing.T) {
	t.Parallel()
	addr := testinn2.Addr(t) // skips, or fails under CI=true, without INN2
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	groups := make([]string, 3)
	for i := range groups {
		groups[i] = fmt.Sprintf("switchyard.it.r%s.g%d", run, i)
		out, err := exec.CommandContext(ctx, "bash", "../scripts/inn2.sh", "newgroup", groups[i]).CombinedOutput()
		if err != nil {
			// Creating groups needs the rights of the news user; the groups
			// the script made at start are shared but still work: our
			// articles are told apart by their message-ids.
			t.Logf("newgroup %s failed (%v: %s); using switchyard.test.*", groups[i], err, strings.TrimSpace(string(out)))
			groups = []string{"switchyard.test.a", "switchyard.test.b", "switchyard.test.c"}
			break
		}
	}

	// INN offers RFC 8054 COMPRESS DEFLATE (when built with zlib) and ends
	// each response with Z_PARTIAL_FLUSH: every response read below under
	// deflate must arrive without waiting for the next one.
	probe, err := Dial(ctx, Config{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	caps, err := probe.Capabilities(ctx)
	probe.Close()
	if err != nil {
		t.Fatal(err)
	}
	deflate := hasCap(caps, "COMPRESS", "DEFLATE")
	modes := []Compression{CompressOff, CompressAuto}
	if deflate {
		modes = append(modes, CompressDeflate)
	} else {
		t.Log("this INN does not list COMPRESS DEFLATE in CAPABILITIES: deflate not tested against it")
	}

	for _, comp := range modes {
		t.Run("compress="+comp.String(), func(t *testing.T) {
			// A stall would last until the command deadline: keep it short
			// so one shows as a failure, not as a slow pass.
			c, err := Dial(ctx, Config{Addr: addr, Compress: comp, CommandTimeout: 15 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			t.Logf("compression in effect: %v", c.Compression())
			if (comp == CompressDeflate || comp == CompressAuto) && deflate && c.Compression() != CompressDeflate {
				t.Fatalf("compression %v, want deflate: the server lists COMPRESS DEFLATE", c.Compression())
			}

			const perGroup = 4
			want := map[string]string{} // message-id -> subject
			before := map[string]int64{}
			for _, g := range groups {
				gr, err := c.Group(ctx, g)
				if err != nil {
					t.Fatalf("GROUP %s: %v", g, err)
				}
				before[g] = gr.High
				for i := 1; i <= perGroup; i++ {
					id := fmt.Sprintf("<%s.%s.%d.%s@switchyard.test>", run, comp, i, strings.ReplaceAll(g, ".", "-"))
					subj := fmt.Sprintf(`%s-%s - "file.part%02d.rar" yEnc (%d/%d) 716800`, run, comp, i, i, perGroup)
					art := "From: Switchyard Test <test@switchyard.test>\r\n" +
						"Newsgroups: " + g + "\r\n" +
						"Subject: " + subj + "\r\n" +
						"Message-ID: " + id + "\r\n\r\n" +
						"=ybegin part=" + strconv.Itoa(i) + " line=128 size=716800 name=file.rar\r\n" +
						".a line starting with a dot\r\n" +
						"=yend size=10\r\n"
					if err := c.Post(ctx, strings.NewReader(art)); err != nil {
						t.Fatalf("POST to %s: %v", g, err)
					}
					want[id] = subj
				}
			}

			for _, g := range groups {
				// innd files the article shortly after nnrpd accepts it.
				var gr Group
				testwait.For(t, "articles to appear in "+g, func() bool {
					gr, err = c.Group(ctx, g)
					return err == nil && gr.High >= before[g]+perGroup
				})
				found := 0
				err := c.Over(ctx, before[g]+1, gr.High, func(ov Overview) error {
					if subj, ok := want[ov.MessageID]; ok {
						if ov.Subject != subj {
							return fmt.Errorf("article %s: subject %q, want %q", ov.MessageID, ov.Subject, subj)
						}
						if ov.Lines != 3 || ov.Bytes == 0 || ov.Date == "" || !strings.Contains(ov.From, "test@switchyard.test") {
							return fmt.Errorf("article %s: implausible overview %+v", ov.MessageID, ov)
						}
						found++
					}
					return nil
				})
				if err != nil {
					t.Fatalf("OVER %s: %v", g, err)
				}
				if found != perGroup {
					t.Fatalf("%s: found %d of our %d articles", g, found, perGroup)
				}
			}
			var body strings.Builder
			for id := range want {
				if _, err := c.Body(ctx, id, &body); err != nil {
					t.Fatalf("BODY %s: %v", id, err)
				}
				if !strings.Contains(body.String(), "\r\n.a line starting with a dot\r\n") {
					t.Fatalf("BODY %s: dot-stuffing not undone: %q", id, body.String())
				}
				break
			}
		})
	}
}
