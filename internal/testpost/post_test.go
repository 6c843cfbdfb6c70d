package testpost

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
	"github.com/switchyard-dev/switchyard/usenet/yenc"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestPostFiles posts a small release to nntptest and reads every article
// back: subjects follow the posters' shape, bodies decode to the files.
func TestPostFiles(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := nntptest.Start(t)
	srv.AddGroup("alt.binaries.test", 0)
	srv.AddGroup("alt.binaries.other", 0)
	c, err := nntp.Dial(ctx, nntp.Config{Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	rel, err := RandomRelease(ctx, 7, "Some.Show.S01E02.720p-GRP", Shape{Volumes: 2, VolumeSize: 20 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("real par2: %v, files: %d", rel.RealPar2, len(rel.Files))
	const poster = "Poster <poster@switchyard.test>"
	posted, err := PostFiles(ctx, c, "alt.binaries.test", poster, rel.Files, Options{
		Title: rel.Title, PartSize: 8 << 10, Crosspost: []string{"alt.binaries.other"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(posted) != len(rel.Files) {
		t.Fatalf("posted %d files, want %d", len(posted), len(rel.Files))
	}
	subject := regexp.MustCompile(`^` + regexp.QuoteMeta(rel.Title) + ` \[(\d+)/(\d+)\] - "([^"]+)" yEnc \((\d+)/(\d+)\) (\d+)$`)
	ids := map[string]bool{}
	for i, p := range posted {
		f := rel.Files[i]
		if p.Name != f.Name || p.Size != int64(len(f.Data)) || len(p.Groups) != 2 {
			t.Fatalf("posted %+v for %s", p, f.Name)
		}
		if m := subject.FindStringSubmatch(p.Subject); m == nil || m[3] != f.Name {
			t.Fatalf("subject %q does not have the posters' shape", p.Subject)
		}
		var got []byte
		for _, part := range p.Parts {
			if ids[part.MessageID] {
				t.Fatalf("message-id %s used twice", part.MessageID)
			}
			ids[part.MessageID] = true
			var art bytes.Buffer
			if _, err := c.Article(ctx, part.MessageID, &art); err != nil {
				t.Fatalf("ARTICLE %s: %v", part.MessageID, err)
			}
			if int64(art.Len()) < part.Bytes-64 || !strings.Contains(art.String(), "Newsgroups: alt.binaries.test,alt.binaries.other\r\n") {
				t.Fatalf("article %s: %d bytes (posted %d): %.300q", part.MessageID, art.Len(), part.Bytes, art.String())
			}
			d, err := yenc.Decode(&art)
			if err != nil {
				t.Fatalf("decode %s: %v", part.MessageID, err)
			}
			if d.Part != part.Number || d.Begin != part.Offset+1 || int64(len(d.Data)) != part.Size {
				t.Fatalf("article %s decodes to part %d at %d, %d bytes; posted %+v", part.MessageID, d.Part, d.Begin, len(d.Data), part)
			}
			got = append(got, d.Data...)
		}
		if !bytes.Equal(got, f.Data) {
			t.Fatalf("%s: the articles decode to other bytes", f.Name)
		}
	}
}

func TestRandomRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, err := RandomRelease(ctx, 1, "Rel", Shape{Volumes: 3, VolumeSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	b, err := RandomRelease(ctx, 1, "Rel", Shape{Volumes: 3, VolumeSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, f := range a.Files {
		names = append(names, f.Name)
	}
	want := "Rel.nfo Rel.part01.rar Rel.part02.rar Rel.part03.rar Rel.par2"
	if got := strings.Join(names, " "); !strings.HasPrefix(got, want) {
		t.Fatalf("files %q, want them to start with %q", got, want)
	}
	for i := range 4 { // the nfo and the volumes depend on the seed alone
		if !bytes.Equal(a.Files[i].Data, b.Files[i].Data) {
			t.Fatalf("%s differs between two releases of one seed", a.Files[i].Name)
		}
	}
	if a.RealPar2 && !bytes.HasPrefix(a.Files[4].Data, []byte("PAR2\x00PKT")) {
		t.Fatalf("%s is not a PAR 2.0 file", a.Files[4].Name)
	}
	if _, err := RandomRelease(ctx, 1, "a/b", Shape{}); err == nil {
		t.Fatal("a title with a slash was accepted")
	}
}
