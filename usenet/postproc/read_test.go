package postproc

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchyard-dev/switchyard/internal/testci"
	"github.com/switchyard-dev/switchyard/internal/testpost"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/rar/rartest"
	"github.com/switchyard-dev/switchyard/usenet/yenc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// post is a release of files split into yEnc articles of partSize, as a
// fetcher serves them, and its binaries as the indexer stores them.
type post struct {
	bodies map[string][]byte
	bins   []usenet.Binary
	rel    usenet.Release
}

func makePost(t testing.TB, name string, files []yencFile, partSize int) post {
	t.Helper()
	p := post{bodies: map[string][]byte{}, rel: usenet.Release{ID: "r", Name: name}}
	for i, f := range files {
		b := usenet.Binary{ID: fmt.Sprintf("b%d", i), Name: f.name, File: i + 1, Release: "c"}
		for _, yp := range yenc.Split(f.name, f.data, partSize) {
			var buf bytes.Buffer
			if err := yenc.Encode(&buf, yp.Data(f.data, partSize), yp); err != nil {
				t.Fatal(err)
			}
			id := fmt.Sprintf("%d.%d@test", i, yp.Number)
			p.bodies[id] = buf.Bytes()
			b.Segments = append(b.Segments, usenet.Segment{Number: yp.Number, Bytes: int64(buf.Len() + 400), ID: id})
		}
		b.Parts = len(b.Segments)
		p.bins = append(p.bins, b)
		p.rel.Binaries = append(p.rel.Binaries, usenet.FileSummary{ID: b.ID, Name: b.Name})
	}
	return p
}

type yencFile struct {
	name string
	data []byte
}

func (p post) fetch(fetched *int) FetchFunc {
	return func(_ context.Context, id string, _ int) ([]byte, error) {
		*fetched++
		b, ok := p.bodies[id]
		if !ok {
			return nil, &nntp.StatusError{Cmd: "BODY", Code: 430, Msg: "no such article"}
		}
		return b, nil
	}
}

func random(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestReadPasswordedRAR: the first volume's first segment says the files
// are encrypted and names them; one article of the budget is used.
func TestReadPasswordedRAR(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	vol := rartest.RAR5([]rartest.File{{Name: "inner/movie.mkv", Data: random(rng, 300<<10)}}, rartest.Options{EncryptedFiles: true, Volume: true})
	p := makePost(t, "Some.Movie.2024.1080p-SY", []yencFile{
		{"Some.Movie.2024.1080p-SY.part1.rar", vol},
		{"Some.Movie.2024.1080p-SY.part2.rar", random(rng, 100<<10)},
	}, 200<<10)
	n := 0
	res, err := Read(context.Background(), p.rel, p.bins, p.fetch(&n), isGone, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Password != 1 || len(res.Inner) != 1 || res.Inner[0] != "inner/movie.mkv" || n != 1 || res.Status != usenet.PostDone {
		t.Fatalf("result %+v after %d fetches", res, n)
	}
}

// TestReadBudget: never more articles than the budget, whatever the
// release holds; a missing article is a counted failure, not an error.
func TestReadBudget(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	var files []yencFile
	for i := range 8 {
		files = append(files, yencFile{fmt.Sprintf("%x", random(rng, 10)), random(rng, 5000+i)})
	}
	p := makePost(t, "abcdef0123456789abcd", files, 4096)
	delete(p.bodies, "0.1@test")
	for _, budget := range []Budget{{Articles: 1}, {Articles: 2}, {Articles: 3}, {Articles: 3, Bytes: 6000}} {
		n := 0
		res, err := Read(context.Background(), p.rel, p.bins, p.fetch(&n), isGone, budget)
		if err != nil {
			t.Fatal(err)
		}
		b := budget.withDefaults()
		if n > b.Articles || res.Articles != n || res.Bytes > b.Bytes {
			t.Errorf("budget %+v: %d fetched, result %+v", budget, n, res)
		}
	}
}

// TestReadConnectionRefusalIsNotArticleFailure: a fetch refused for a
// reason of the server, the connection or the account (400 service
// unavailable, 480 authentication required) makes Read return the error,
// so the release gets no record and a later scan reads it again, while an
// answer about the article (430 no such article, a 451 refusal) is its
// counted failure. isGone used to take every status error for the
// article's, so such a refusal marked the release failed for good.
func TestReadConnectionRefusalIsNotArticleFailure(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 9))
	p := makePost(t, "Some.Show.S01E02.720p-GRP", []yencFile{
		{"Some.Show.S01E02.720p-GRP.nfo", []byte("Some Show S01E02 720p\r\nnotes\r\n")},
		{"Some.Show.S01E02.720p-GRP.rar", random(rng, 5000)},
	}, 4096)
	for _, tc := range []struct {
		se   *nntp.StatusError
		gone bool
	}{
		{&nntp.StatusError{Cmd: "BODY", Code: 400, Msg: "service unavailable, closing connection"}, false},
		{&nntp.StatusError{Cmd: "BODY", Code: 480, Msg: "authentication required"}, false},
		{&nntp.StatusError{Cmd: "BODY", Code: 430, Msg: "no such article"}, true},
		{&nntp.StatusError{Cmd: "BODY", Code: 451, Msg: "article removed (DMCA)"}, true},
	} {
		fetch := func(context.Context, string, int) ([]byte, error) { return nil, tc.se }
		res, err := Read(context.Background(), p.rel, p.bins, fetch, isGone, Budget{})
		switch {
		case !tc.gone && err == nil:
			t.Errorf("BODY answered %d: Read returned no error (status %q, failures %v): "+
				"the release would be recorded and never tried again", tc.se.Code, res.Status, res.Failures)
		case tc.gone && (err != nil || !slices.Contains(res.Failures, usenet.FailFetch)):
			t.Errorf("BODY answered %d: Read = %v, failures %v; want a counted fetch failure", tc.se.Code, err, res.Failures)
		}
	}
}

// TestReadPasswordedBeatsPotentially: Newznab's password attr is 1 for
// passworded (encrypted files seen) and 2 for only potentially passworded
// (an archive inside). When Read reads two RAR headers, one showing
// encrypted files and one an inner archive, the release is passworded: 1.
// (Was: Read combined them with max(), so 2 won over 1.)
func TestReadPasswordedBeatsPotentially(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(21, 22))
	encrypted := rartest.RAR5([]rartest.File{{Name: "movie.mkv", Data: random(rng, 3000)}}, rartest.Options{EncryptedFiles: true, Volume: true})
	inner := rartest.RAR5([]rartest.File{{Name: "extras.rar", Data: random(rng, 2000)}}, rartest.Options{})
	p := makePost(t, "Some.Movie.2024.1080p-GRP", []yencFile{
		{"Some.Movie.2024.1080p-GRP.part01.rar", encrypted},
		// An obfuscated one-article file: sniffed, its bytes are a RAR.
		{"a1b2c3d4e5f6a7b8c9d0", inner},
	}, 100<<10)
	n := 0
	res, err := Read(context.Background(), p.rel, p.bins, p.fetch(&n), isGone, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d fetches, want both files read; result %+v", n, res)
	}
	if res.Password != 1 {
		t.Fatalf("Password = %d with encrypted files read (inner %q); want 1 (passworded)", res.Password, res.Inner)
	}
}

// TestReadStatusDoneWhenABodyParsed: usenet.PostDone is "at least one
// body was read and parsed", usenet.PostFailed "every body it read
// failed". Here the .par2 body is fetched, decoded and parsed (a verified
// PAR2 main packet, no file descriptions), and only the RAR volume's
// article is gone: the status is done, not failed. (Was: a release that
// found nothing to keep was failed after any failure, though a body had
// been read and parsed.)
func TestReadStatusDoneWhenABodyParsed(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(23, 24))
	p := makePost(t, "Some.Show.S01E02.720p-GRP", []yencFile{
		{"Some.Show.S01E02.720p-GRP.par2", par2MainPacket()},
		{"Some.Show.S01E02.720p-GRP.part01.rar", random(rng, 5000)},
	}, 100<<10)
	delete(p.bodies, "1.1@test") // the volume's article is gone
	n := 0
	res, err := Read(context.Background(), p.rel, p.bins, p.fetch(&n), isGone, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || !slices.Equal(res.Failures, []string{usenet.FailFetch}) {
		t.Fatalf("%d fetches, failures %v; want 2 and one fetch failure", n, res.Failures)
	}
	if res.Status != usenet.PostDone {
		t.Fatalf("Status = %q with the par2 body read and parsed; want %q", res.Status, usenet.PostDone)
	}
}

// par2MainPacket is a PAR 2.0 main packet (slice size 4096, no files)
// whose MD5 verifies.
func par2MainPacket() []byte {
	body := make([]byte, 12)
	binary.LittleEndian.PutUint64(body, 4096)
	pkt := []byte("PAR2\x00PKT")
	pkt = binary.LittleEndian.AppendUint64(pkt, uint64(64+len(body)))
	pkt = append(pkt, make([]byte, 16)...) // MD5, below
	pkt = append(pkt, bytes.Repeat([]byte{7}, 16)...)
	pkt = append(pkt, "PAR 2.0\x00Main\x00\x00\x00\x00"...)
	pkt = append(pkt, body...)
	sum := md5.Sum(pkt[32:])
	copy(pkt[16:32], sum[:])
	return pkt
}

// TestReadOverheadOfAHostilePartRange: a large body (decoded as a prefix,
// its range taken from =ypart) whose size= and end= claim nearly 2^63
// bytes measures no article overhead: the part claims more data than its
// article's bytes. (Was: the part's length times 1.0315 overflowed int64,
// and the wrapped product gave an overhead of hundreds of terabytes per
// article, which every size estimate of the release then subtracted.)
func TestReadOverheadOfAHostilePartRange(t *testing.T) {
	t.Parallel()
	const huge = 9_000_000_000_000_000_000
	var body bytes.Buffer
	fmt.Fprintf(&body, "=ybegin part=1 total=2 line=128 size=%d name=movie.part01.rar\r\n", huge)
	fmt.Fprintf(&body, "=ypart begin=1 end=%d\r\n", huge)
	for body.Len() <= wholeMax {
		body.WriteString(strings.Repeat("a", 128) + "\r\n")
	}
	if d, err := decode(body.Bytes()); err != nil || d.Begin != 1 || d.End != huge {
		t.Fatalf("decode: range %d..%d, %v; want the prefix of 1..%d", d.Begin, d.End, err, huge)
	}
	seg := usenet.Segment{Number: 1, Bytes: int64(body.Len() + 400), ID: "0.1@test"}
	fetch := func(context.Context, string, int) ([]byte, error) { return body.Bytes(), nil }
	rd := &reader{fetch: fetch, isGone: isGone, budget: Budget{}.withDefaults(), rel: usenet.Release{ID: "r", Name: "Some.Movie.2024.1080p-GRP"}}
	f := &file{bin: usenet.Binary{ID: "b0", Name: "movie.part01.rar", Parts: 2, Segments: []usenet.Segment{seg}}, name: "movie.part01.rar", bytes: seg.Bytes}
	rd.files = []*file{f}
	if fetched, err := rd.readFile(context.Background(), f); !fetched || err != nil {
		t.Fatalf("readFile = %v, %v", fetched, err)
	}
	if rd.overhead != 0 {
		t.Fatalf("overhead %d of a %d-byte article whose part claims %d bytes; want 0", rd.overhead, seg.Bytes, huge)
	}
}

// TestDecodePrefix: a large body's prefix decodes to the data's first
// bytes, with the header's fields.
func TestDecodePrefix(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	data := random(rng, 900<<10)
	parts := yenc.Split("big.bin", data, 700<<10)
	var buf bytes.Buffer
	if err := yenc.Encode(&buf, parts[0].Data(data, 700<<10), parts[0]); err != nil {
		t.Fatal(err)
	}
	d, err := decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(d.Data, data[:prefixLen]) || d.Name != "big.bin" || d.Size != int64(len(data)) || d.Begin != 1 || d.End != 700<<10 {
		t.Fatalf("decoded %d bytes (%v), name %q size %d range %d-%d", len(d.Data), bytes.Equal(d.Data, data[:len(d.Data)]), d.Name, d.Size, d.Begin, d.End)
	}
}

// TestReadPrefixAfterTextMentioningYbegin: a large body (decoded as a
// prefix) whose text before the header mentions "=ybegin " inside a line
// decodes from the data, as yenc.Decode and downloaders read it: an
// encrypted RAR posted under an obfuscated name is sniffed and found
// passworded.
// (Was: the prefix started at the first "=ybegin " anywhere, so the
// header lines were decoded as data: no RAR signature, password 0.)
func TestReadPrefixAfterTextMentioningYbegin(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(25, 26))
	vol := rartest.RAR5([]rartest.File{{Name: "movie.mkv", Data: random(rng, 300<<10)}}, rartest.Options{EncryptedFiles: true, Volume: true})
	p := makePost(t, "Some.Movie.2024.1080p-GRP", []yencFile{{"a1b2c3d4e5f6a7b8c9d0", vol}}, 400<<10)
	id := p.bins[0].Segments[0].ID
	p.bodies[id] = append([]byte("posted by a tool whose =ybegin line follows\r\n"), p.bodies[id]...)
	if len(p.bodies[id]) <= wholeMax {
		t.Fatalf("body of %d bytes: want one over %d, decoded as a prefix", len(p.bodies[id]), wholeMax)
	}
	if d, err := yenc.Decode(bytes.NewReader(p.bodies[id])); err != nil || !bytes.Equal(d.Data, vol) {
		t.Fatalf("yenc.Decode of the body: %v; want the volume", err)
	}
	n := 0
	res, err := Read(context.Background(), p.rel, p.bins, p.fetch(&n), isGone, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Password != 1 || !slices.Equal(res.Inner, []string{"movie.mkv"}) {
		t.Fatalf("password %d, inner %q (failures %v); want 1 and movie.mkv", res.Password, res.Inner, res.Failures)
	}
}

// TestReadIgnoresLongYencNames: the =ybegin name= of a file posted under
// an obfuscated name is used only up to nameMax bytes. (Was: any name a
// line held was kept: three articles whose names were 60 KiB of '&' gave
// the release 1.1 MB of names as JSON, past NATS's default max payload.)
func TestReadIgnoresLongYencNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("&", 60<<10) + ".mkv"
	var files []yencFile
	for i := range 3 {
		files = append(files, yencFile{fmt.Sprintf("%020x", 1_000_000_000_000_000+i), []byte("some data")})
	}
	p := makePost(t, "Some.Movie.2024.1080p-GRP", files, 4096)
	for i, b := range p.bins {
		var buf bytes.Buffer
		part := yenc.Split(fmt.Sprintf("%d%s", i, long), files[i].data, 4096)[0]
		if err := yenc.Encode(&buf, files[i].data, part); err != nil {
			t.Fatal(err)
		}
		p.bodies[b.Segments[0].ID] = buf.Bytes()
	}
	n := 0
	res, err := Read(context.Background(), p.rel, p.bins, p.fetch(&n), isGone, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("%d fetches, want the 3 yEnc headers read", n)
	}
	for id, name := range res.Files {
		if len(name) > nameMax {
			t.Fatalf("binary %s named with %d bytes; want at most %d", id, len(name), nameMax)
		}
	}
}

// TestReadBoundsInnerNames: the inner names kept are bounded by innerMax
// as JSON. (Was: every name the first 64 KiB held was kept, 6 bytes of
// JSON for each '&' of them: 330 KiB of record per RAR volume read.)
func TestReadBoundsInnerNames(t *testing.T) {
	t.Parallel()
	var inner []rartest.File
	for i := range 60 {
		inner = append(inner, rartest.File{Name: fmt.Sprintf("%02d%s.mkv", i, strings.Repeat("&", 900)), Data: []byte("x")})
	}
	vol := rartest.RAR5(inner, rartest.Options{})
	p := makePost(t, "Some.Movie.2024.1080p-GRP", []yencFile{{"Some.Movie.2024.1080p-GRP.part01.rar", vol}}, 100<<10)
	n := 0
	res, err := Read(context.Background(), p.rel, p.bins, p.fetch(&n), isGone, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, name := range res.Inner {
		total += jsonLen(name)
	}
	if len(res.Inner) == 0 || total > innerMax {
		t.Fatalf("%d inner names of %d bytes as JSON; want some, at most %d", len(res.Inner), total, innerMax)
	}
}

// FuzzRead: whatever the bodies, Read neither panics nor fetches past
// its budget.
func FuzzRead(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	f.Add([]byte("=ybegin line=128 size=3 name=x.nfo\r\nabc\r\n=yend size=3\r\n"), "x.nfo")
	f.Add(random(rng, 64), "abcdef0123456789.par2")
	f.Add([]byte("=ybegin part=1 total=2 line=128 size=9 name=a.part1.rar\r\n=ypart begin=1 end=4\r\n|\x8b\x9c\x8b\r\n=yend size=4 part=1\r\n"), "a.part1.rar")
	f.Fuzz(func(t *testing.T, body []byte, name string) {
		name = strings.ToValidUTF8(name, "")
		bins := []usenet.Binary{
			{ID: "b0", Name: name, Parts: 1, Segments: []usenet.Segment{{Number: 1, Bytes: int64(len(body)), ID: "0"}}},
			{ID: "b1", Name: "x.nfo", Parts: 1, Segments: []usenet.Segment{{Number: 1, Bytes: int64(len(body)), ID: "1"}}},
			{ID: "b2", Name: "abcdef0123456789", Parts: 1, Segments: []usenet.Segment{{Number: 1, Bytes: int64(len(body)), ID: "2"}}},
		}
		rel := usenet.Release{ID: "r", Name: "abcdef0123456789abcd"}
		n := 0
		fetch := func(context.Context, string, int) ([]byte, error) { n++; return body, nil }
		res, err := Read(context.Background(), rel, bins, fetch, isGone, Budget{})
		if err != nil || n > ArticlesDefault || res.Articles != n {
			t.Fatalf("%d fetches, %+v, %v", n, res, err)
		}
	})
}

// TestReadObfuscatedNames: a post of random names, its par2 index (made by
// par2 create) holding the real ones, and a random release name: the
// volumes get their real names (equal sizes in the order posted), the
// release its real name and category, the NFO the release's name.
func TestReadObfuscatedNames(t *testing.T) {
	t.Parallel()
	const title = "Real.Show.S03E04.1080p.WEB-DL-SY"
	rel, err := testpost.RandomRelease(context.Background(), 11, title, testpost.Shape{Volumes: 4, VolumeSize: 40 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if !rel.RealPar2 {
		testci.Missing(t, "par2 is not installed (Debian package par2)")
	}
	rng := rand.New(rand.NewPCG(12, 13))
	var files []yencFile
	for _, f := range rel.Files {
		name := fmt.Sprintf("%x", random(rng, 10))
		if strings.HasSuffix(f.Name, ".par2") {
			name += ".par2"
		}
		files = append(files, yencFile{name, f.Data})
	}
	p := makePost(t, fmt.Sprintf("%x", random(rng, 10)), files, 16<<10)
	n := 0
	res, err := Read(context.Background(), p.rel, p.bins, p.fetch(&n), isGone, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Name != title || !res.Renamed || n > ArticlesDefault {
		t.Fatalf("result %+v after %d fetches", res, n)
	}
	for i, f := range rel.Files {
		if strings.HasSuffix(f.Name, ".par2") {
			continue
		}
		if got := res.Files[p.bins[i].ID]; got != f.Name {
			t.Errorf("%s named %q, want %q", p.bins[i].Name, got, f.Name)
		}
	}
	if len(res.Par2) != 4 || !res.NFO || !strings.Contains(res.NFOText, title) {
		t.Errorf("par2 %v, nfo %v %q", res.Par2, res.NFO, res.NFOText)
	}
}
