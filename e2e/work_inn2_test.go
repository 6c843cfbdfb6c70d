//go:build unix

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testinn2"
	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/work"
)

// TestWorkINN2: coordinator run and worker run, as processes, index a group
// posted to a real INN2 server completely: the counting indexer's digest
// equals the digest of the article numbers INN2 lists with OVER.
func TestWorkINN2(t *testing.T) {
	t.Parallel()
	addr := testinn2.Addr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	group := "switchyard.work.r" + run
	if out, err := exec.CommandContext(ctx, "bash", "../scripts/inn2.sh", "newgroup", group).CombinedOutput(); err != nil {
		t.Fatalf("newgroup %s: %v: %s", group, err, out)
	}
	c, err := nntp.Dial(ctx, nntp.Config{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const posts = 120
	for i := 1; i <= posts; i++ {
		art := "From: Switchyard Test <test@switchyard.test>\r\n" +
			"Newsgroups: " + group + "\r\n" +
			fmt.Sprintf("Subject: work test %s - \"file.part%03d.rar\" yEnc (%d/%d)\r\n", run, i, i, posts) +
			fmt.Sprintf("Message-ID: <%s.%d@switchyard.test>\r\n\r\n", run, i) +
			"body\r\n"
		if err := c.Post(ctx, strings.NewReader(art)); err != nil {
			t.Fatalf("POST %d: %v", i, err)
		}
	}
	// innd files an article shortly after nnrpd accepts it.
	gr := waitArticles(t, ctx, c, group, posts)
	want := work.GroupCount{}
	if err := c.OverLines(ctx, gr.Low, gr.High, func(line []byte) error {
		n, err := strconv.ParseInt(string(line[:strings.IndexByte(string(line), '\t')]), 10, 64)
		if err != nil {
			return err
		}
		want.Add(work.GroupCount{Articles: 1, Sum: work.ArticleDigest(group, n)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	env := testpersist.Start(t, 1)
	st, err := work.NewStore(env.Client(), "inn2")
	if err != nil {
		t.Fatal(err)
	}
	common := []string{"--nats", env.URL(), "--source", "inn2"}
	coord := startLogProc(t, "coordinator", append([]string{"coordinator", "run", "--nntp", addr, "--groups", group, "--nntp-conns", "2", "--range-size", "50", "--chunk", "20"}, common...)...)
	worker := startLogProc(t, "worker", append([]string{"worker", "run", "--indexer", "count", "--name", "inn2-worker"}, common...)...)
	waitStatus(t, st, "the INN2 group indexed", func(s work.Status) bool {
		return len(s.Groups) == 1 && s.Groups[0].PlannedThrough == gr.High && s.Groups[0].Planned == gr.High-gr.Low+1 && s.Groups[0].Done == s.Groups[0].Planned
	})
	got, _ := indexed(t, st)
	if got[group] != want {
		t.Errorf("indexed %+v, want %+v: every article INN2 holds, once", got[group], want)
	}
	for _, p := range []*logProc{worker, coord} {
		p.signal(syscall.SIGTERM)
		if code := p.exit(30 * time.Second); code != 0 {
			t.Errorf("%s exited %d after SIGTERM", p.name, code)
		}
	}
}
