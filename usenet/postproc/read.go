package postproc

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/nfo"
	"github.com/switchyard-dev/switchyard/usenet/par2"
	"github.com/switchyard-dev/switchyard/usenet/rar"
)

// Budget bounds what Read fetches of one release.
type Budget struct {
	// Articles is the most articles fetched. Zero means ArticlesDefault.
	Articles int
	// Bytes is the most article bytes fetched (by the sizes the overview
	// announced). Zero means BytesDefault.
	Bytes int64
}

// Defaults of Budget.
const (
	// ArticlesDefault: the par2 index, the NFO and the first RAR volume's
	// first segment are one article each.
	ArticlesDefault = 3
	// BytesDefault: three articles of the usual 700 KiB, with room.
	BytesDefault = 2 << 20
	// nfoArticleMax is the largest .nfo article read: NFOMax of text,
	// yEnc's overhead and the headers.
	nfoArticleMax = usenet.NFOMax + usenet.NFOMax/8 + 4<<10
)

// Bounds on the names a release keeps from its bodies. What Read finds is
// published with the release (and every later publication of it) as
// JSON, where '&', '<', '>' and control characters take 6 bytes each: a
// par2 index of one 230 KiB article, its names made of '&', gave a release
// record of 1.27 MB, over NATS's default max payload (1 MiB), so storing
// it failed at every scan, for good.
const (
	// nameMax is the longest name from a body (a par2 file name, a yEnc
	// name=, a RAR inner name) that is used: no downloader writes a
	// longer path.
	nameMax = 1 << 10
	// par2ListMax bounds the par2 files kept, and matched to the
	// binaries, by the bytes of their names as JSON: the first ones by
	// name that fit.
	par2ListMax = 128 << 10
	// innerMax bounds the inner names kept the same way.
	innerMax = 32 << 10
)

// jsonLen is the length of s as a JSON string, as the records hold it.
func jsonLen(s string) int {
	b, _ := json.Marshal(s)
	return len(b)
}

func (b Budget) withDefaults() Budget {
	if b.Articles <= 0 {
		b.Articles = ArticlesDefault
	}
	if b.Bytes <= 0 {
		b.Bytes = BytesDefault
	}
	return b
}

// FetchFunc writes the body of article id (without angle brackets) to w.
// An error that is a *nntp.StatusError (the server answered: no such
// article) is the article's failure; any other error is the fetcher's
// (connection, shutdown), and Read stops with it.
// size is the article's size as the overview announced it, a hint.
type FetchFunc func(ctx context.Context, id string, size int) ([]byte, error)

// Result is what Read found in a release's bodies.
type Result struct {
	usenet.Processed
	// NFOText is the NFO as UTF-8 text, when one was read.
	NFOText  string
	Articles int
	Bytes    int64
	// Failures are the kinds (usenet.FailFetch, ...) of what failed.
	Failures []string
	// Renamed says some file or the release got its real name.
	Renamed bool
	// Status is usenet.PostDone, PostNothing or PostFailed.
	Status string
}

// Empty reports whether r found nothing to keep in the release.
func (r *Result) Empty() bool {
	p := r.Processed
	return p.Name == "" && len(p.Files) == 0 && p.Password == 0 && !p.NFO && len(p.Par2) == 0 && len(p.Inner) == 0
}

// reader is the state of one Read.
type reader struct {
	fetch  FetchFunc
	isGone func(error) bool
	budget Budget
	rel    usenet.Release
	files  []*file
	res    Result
	// parsed counts the bodies fetched, decoded and read without a
	// failure: the release is failed only when none was (see finish).
	parsed int
	// overhead is article bytes beyond 1.0315 times the data (headers and
	// yEnc lines), measured on a fetched article; 0 unknown.
	overhead int64
	par2     []par2.File // the index's files, once read
	index    *file       // the file they were read from
	// innerLen is the JSON length of res.Inner's names (innerMax).
	innerLen int
}

// file is one binary of the release as Read sees it.
type file struct {
	bin   usenet.Binary
	name  string // the real name once known, else the posted one
	real  bool   // name came from the bodies
	pname string // the name the par2 index gives it
	yname string // the name its yEnc header gives it, when the posted one is obfuscated
	bytes int64  // article bytes of the post's segments
	size  int64  // exact decoded size, from a fetched =ybegin; 0 unknown
	hash  [16]byte
	hashd bool // hash holds the MD5 of its first 16 KiB
	read  bool // a segment of it was fetched
	kind  string
}

// kinds a fetched body turned out to be.
const (
	kindPar2 = "par2"
	kindNFO  = "nfo"
	kindRAR  = "rar"
)

// Read fetches, within budget, the few bodies that tell what release r
// holds (bins are its binaries, trimmed to its post: usenet.PostBinaries)
// and returns what they say: the par2 index (file names, sizes), the NFO
// and the first RAR volume's headers (encryption, inner names), and real
// names for files posted under obfuscated ones (from the par2 index, else
// from a segment's yEnc header). A body that fails to fetch, decode or
// parse is counted in Result.Failures and changes nothing. The error is
// the fetcher's own (see FetchFunc), or ctx's.
func Read(ctx context.Context, r usenet.Release, bins []usenet.Binary, fetch FetchFunc, isGone func(error) bool, budget Budget) (Result, error) {
	rd := &reader{fetch: fetch, isGone: isGone, budget: budget.withDefaults(), rel: r}
	for _, b := range bins {
		f := &file{bin: b, name: b.Name}
		for _, s := range b.Segments {
			f.bytes += s.Bytes
		}
		rd.files = append(rd.files, f)
	}
	err := rd.run(ctx)
	rd.finish()
	return rd.res, err
}

func (rd *reader) run(ctx context.Context) error {
	// 1. The par2 index: the smallest .par2, else (every name obfuscated)
	// the smallest one-article files, one of which is usually the index,
	// sniffed for what they are.
	if f := rd.smallest(func(f *file) bool { return isPar2(f.name) }); f != nil {
		if _, err := rd.readFile(ctx, f); err != nil {
			return err
		}
	} else {
		for rd.findPar2() == nil {
			f := rd.smallest(func(f *file) bool { return !f.read && usenet.Obfuscated(f.name) && len(f.bin.Segments) == 1 })
			if f == nil || !rd.affords(f) {
				break
			}
			if _, err := rd.readFile(ctx, f); err != nil {
				return err
			}
		}
	}
	// 2. The NFO: the .nfo, else the smallest one-article file of a name
	// that says nothing (an NFO is the smallest file of a post).
	if !rd.res.NFO {
		f := rd.smallest(func(f *file) bool {
			return !f.read && strings.HasSuffix(strings.ToLower(f.name), ".nfo") && f.bytes <= nfoArticleMax
		})
		if f == nil {
			f = rd.smallest(func(f *file) bool {
				return !f.read && !f.real && usenet.Obfuscated(f.name) && !isPar2(f.name) && len(f.bin.Segments) == 1 && f.bytes <= nfoArticleMax
			})
		}
		if f != nil {
			if _, err := rd.readFile(ctx, f); err != nil {
				return err
			}
		}
	}
	// 3. The first RAR volume.
	if f := rd.firstVolume(); f != nil && !f.read {
		if _, err := rd.readFile(ctx, f); err != nil {
			return err
		}
	}
	// 4. yEnc names for obfuscated files no par2 named, biggest first (the
	// release's main file).
	for {
		f := rd.biggest(func(f *file) bool { return !f.read && !f.real && usenet.Obfuscated(f.name) && !isPar2(f.name) })
		if f == nil || !rd.affords(f) {
			break
		}
		if _, err := rd.readFile(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

// affords reports whether the budget has room for f's first segment.
func (rd *reader) affords(f *file) bool {
	if len(f.bin.Segments) == 0 || rd.res.Articles >= rd.budget.Articles {
		return false
	}
	return rd.res.Bytes+firstSegment(f.bin).Bytes <= rd.budget.Bytes
}

// findPar2 is the file read as a par2 index, nil before one.
func (rd *reader) findPar2() *file {
	for _, f := range rd.files {
		if f.kind == kindPar2 {
			return f
		}
	}
	return nil
}

func (rd *reader) smallest(ok func(*file) bool) *file {
	var best *file
	for _, f := range rd.files {
		if ok(f) && (best == nil || cmp.Or(cmp.Compare(f.bytes, best.bytes), cmp.Compare(f.name, best.name)) < 0) {
			best = f
		}
	}
	return best
}

func (rd *reader) biggest(ok func(*file) bool) *file {
	var best *file
	for _, f := range rd.files {
		if ok(f) && (best == nil || cmp.Or(cmp.Compare(best.bytes, f.bytes), cmp.Compare(f.name, best.name)) < 0) {
			best = f
		}
	}
	return best
}

func firstSegment(b usenet.Binary) usenet.Segment {
	seg := b.Segments[0]
	for _, s := range b.Segments[1:] {
		if s.Number < seg.Number {
			seg = s
		}
	}
	return seg
}

func (rd *reader) fail(kind string) { rd.res.Failures = append(rd.res.Failures, kind) }

// readFile fetches f's first segment within the budget, decodes it and
// reads what it is: par2, NFO or RAR (by name, or sniffed). It reports
// whether a body was fetched.
func (rd *reader) readFile(ctx context.Context, f *file) (bool, error) {
	if !rd.affords(f) {
		return false, nil
	}
	seg := firstSegment(f.bin)
	f.read = true
	rd.res.Articles++
	rd.res.Bytes += seg.Bytes
	body, err := rd.fetch(ctx, seg.ID, int(min(seg.Bytes, maxArticle)))
	if err != nil {
		if ctx.Err() != nil || rd.isGone == nil || !rd.isGone(err) {
			return true, fmt.Errorf("postproc: fetch %s: %w", seg.ID, err)
		}
		rd.fail(usenet.FailFetch)
		return true, nil
	}
	d, err := decode(body)
	if err != nil {
		rd.fail(usenet.FailDecode)
		return true, nil
	}
	if seg.Number == 1 && d.Begin <= 1 {
		f.size = d.Size
		if len(d.Data) >= 16<<10 || int64(len(d.Data)) == d.Size && d.Size > 0 {
			f.hash, f.hashd = md5First16k(d.Data), true
		}
	}
	n := int64(len(d.Data))
	if d.End >= d.Begin && d.Begin > 0 {
		n = d.End - d.Begin + 1 // a prefix was decoded: the part's length
	}
	// A part longer than maxArticle, more than an article fetched holds,
	// is a hostile size= and end=: clamped, n*yencRatio cannot overflow.
	n = min(n, maxArticle)
	if n > 0 && seg.Bytes > 0 {
		rd.overhead = max(seg.Bytes-n*yencRatio/10000, 0)
	}
	if d.Name != "" && len(d.Name) <= nameMax && d.Name != f.bin.Name && !usenet.Obfuscated(d.Name) && usenet.Obfuscated(f.bin.Name) {
		// The subject's name is obfuscated, the yEnc header's is not.
		f.yname = d.Name
	}
	defer func() {
		if rd.par2 != nil {
			rd.matchPar2(nil)
		} else {
			rd.rename()
		}
	}()
	if f.pname == "" {
		rd.rename()
	}
	lower := strings.ToLower(f.name)
	failures := len(rd.res.Failures)
	switch {
	case isPar2(lower):
		rd.readPar2(f, d.Data, true)
	case strings.HasSuffix(lower, ".nfo"):
		rd.readNFO(f, d.Data, true)
	case isVolume(lower):
		rd.readRAR(f, d.Data, true)
	default:
		// A name that says nothing: what the bytes are.
		switch {
		case bytes.HasPrefix(d.Data, []byte("PAR2\x00PKT")):
			rd.readPar2(f, d.Data, false)
		case bytes.HasPrefix(d.Data, []byte("Rar!\x1a\x07")):
			rd.readRAR(f, d.Data, false)
		case len(d.Data) <= usenet.NFOMax && nfo.Looks(d.Data) && !rd.res.NFO:
			rd.readNFO(f, d.Data, false)
		}
	}
	if len(rd.res.Failures) == failures {
		rd.parsed++
	}
	return true, nil
}

func (rd *reader) readPar2(f *file, data []byte, named bool) {
	files, err := par2.Files(data)
	if err != nil {
		if named {
			rd.fail(usenet.FailPar2)
		}
		return
	}
	f.kind = kindPar2
	files = boundPar2(files)
	if len(files) == 0 {
		return // a recovery volume's first packets, or the main packet only
	}
	list := make([]usenet.Par2File, 0, len(files))
	for _, pf := range files {
		list = append(list, usenet.Par2File{Name: pf.Name, Size: pf.Size})
	}
	if len(list) > len(rd.res.Par2) {
		rd.res.Par2, rd.index = list, f
	}
	rd.matchPar2(files)
}

// boundPar2 is files (sorted by name) without names over nameMax, cut
// where their names pass par2ListMax.
func boundPar2(files []par2.File) []par2.File {
	out := make([]par2.File, 0, len(files))
	total := 0
	for _, f := range files {
		if len(f.Name) > nameMax {
			continue
		}
		if total += jsonLen(f.Name); total > par2ListMax {
			break
		}
		out = append(out, f)
	}
	return out
}

func (rd *reader) readNFO(f *file, data []byte, named bool) {
	if !nfo.Looks(data) {
		if named {
			rd.fail(usenet.FailNFO)
		}
		return
	}
	f.kind = kindNFO
	rd.res.NFO = true
	rd.res.NFOText = nfo.Text(data)
}

func (rd *reader) readRAR(f *file, data []byte, named bool) {
	info, err := rar.Inspect(data)
	if err != nil && len(info.Names) == 0 && !info.EncryptedHeaders {
		if named || !errors.Is(err, rar.ErrNotRAR) {
			rd.fail(usenet.FailRAR)
		}
		return
	}
	f.kind = kindRAR
	rd.res.Password = combinePassword(rd.res.Password, info.Password())
	for _, n := range info.Names {
		if len(n) > nameMax || slices.Contains(rd.res.Inner, n) {
			continue
		}
		if rd.innerLen += jsonLen(n); rd.innerLen > innerMax {
			break
		}
		rd.res.Inner = append(rd.res.Inner, n)
	}
}

// combinePassword is the Newznab password attr of two findings. Its
// values are not ordered as numbers: 1 (passworded, encryption seen)
// wins over 2 (only potentially passworded, an inner archive), which
// wins over 0.
func combinePassword(a, b int) int {
	if a == 1 || b == 1 {
		return 1
	}
	return max(a, b)
}

// firstVolume is the release's first RAR volume by name: name.part01.rar
// (any number of zeros), else name.rar beside .rNN volumes or alone, else
// the lowest .rNN.
func (rd *reader) firstVolume() *file {
	var best *file
	rank := func(f *file) (int, int) {
		n := strings.ToLower(f.name)
		if m := partRe.FindStringSubmatch(n); m != nil {
			k, _ := strconv.Atoi(m[1])
			if k == 1 {
				return 0, 0
			}
			return -1, 0 // a later volume
		}
		if strings.HasSuffix(n, ".rar") {
			return 1, 0
		}
		if m := rNNRe.FindStringSubmatch(n); m != nil {
			k, _ := strconv.Atoi(m[1])
			return 2, k
		}
		return -1, 0
	}
	bestR, bestK := 0, 0
	for _, f := range rd.files {
		r, k := rank(f)
		if r < 0 || len(f.bin.Segments) == 0 {
			continue
		}
		if best == nil || r < bestR || r == bestR && (k < bestK || k == bestK && f.name < best.name) {
			best, bestR, bestK = f, r, k
		}
	}
	return best
}

var (
	partRe = regexp.MustCompile(`\.part0*(\d+)\.rar$`)
	rNNRe  = regexp.MustCompile(`\.r(\d{2,3})$`)
)

func isPar2(name string) bool { return strings.HasSuffix(strings.ToLower(name), ".par2") }

func isVolume(lower string) bool {
	return strings.HasSuffix(lower, ".rar") || rNNRe.MatchString(lower)
}

// finish turns the files' names into the result: the real names, the
// release's name when its own is obfuscated, and the status.
func (rd *reader) finish() {
	for _, f := range rd.files {
		if f.real && f.name != f.bin.Name {
			if rd.res.Files == nil {
				rd.res.Files = map[string]string{}
			}
			rd.res.Files[f.bin.ID] = f.name
		}
	}
	if usenet.Obfuscated(rd.rel.Name) {
		// The release is named after its biggest file with a real name
		// that is not a recovery file.
		if f := rd.biggest(func(f *file) bool { return f.real && !isPar2(f.name) && !usenet.Obfuscated(f.name) }); f != nil {
			if name := usenet.BaseName(f.name); name != rd.rel.Name {
				rd.res.Name = name
			}
		} else if len(rd.res.Par2) > 0 {
			// No binary matched, but the index names the files.
			biggest := rd.res.Par2[0]
			for _, p := range rd.res.Par2[1:] {
				if p.Size > biggest.Size {
					biggest = p
				}
			}
			if !usenet.Obfuscated(biggest.Name) {
				rd.res.Name = usenet.BaseName(biggest.Name)
			}
		}
	}
	// A sniffed NFO or par2 index under an obfuscated name is the
	// release's: named after it, as posters name them.
	name := rd.res.Name
	if name == "" && !usenet.Obfuscated(rd.rel.Name) {
		name = rd.rel.Name
	}
	for _, f := range rd.files {
		if name == "" || f.real || !usenet.Obfuscated(f.bin.Name) || (f.kind != kindNFO && f != rd.index) {
			continue
		}
		if rd.res.Files == nil {
			rd.res.Files = map[string]string{}
		}
		rd.res.Files[f.bin.ID] = name + "." + f.kind
	}
	rd.res.Renamed = rd.res.Name != "" || len(rd.res.Files) > 0
	switch {
	case rd.res.Articles == 0:
		rd.res.Status = usenet.PostNothing
	case rd.parsed == 0 && len(rd.res.Failures) > 0:
		// Every body read failed. One read and parsed makes the release
		// done even when it held nothing to keep (a par2 main packet
		// alone), as usenet.PostDone says.
		rd.res.Status = usenet.PostFailed
	default:
		rd.res.Status = usenet.PostDone
	}
}
