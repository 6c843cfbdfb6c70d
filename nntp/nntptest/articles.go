package nntptest

import (
	"encoding/binary"
	"hash/crc32"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"time"
)

// Shape of the generated binary posts.
const (
	// PartSizeDefault is the decoded size of one generated article, like
	// the ~700 KiB parts real posters use.
	PartSizeDefault = 716800
	// yencLineLen is the encoded line length of generated bodies.
	yencLineLen = 128
	// partsPerFile and filesPerRelease shape the generated subjects: each
	// release is filesPerRelease rar volumes of partsPerFile parts.
	partsPerFile    = 50
	filesPerRelease = 4
	// baseTime is the date of article 1; each article is 7 s younger.
	baseUnix = 1767225600 // 2026-01-01T00:00:00Z
	// passwordedEvery: one release in about this many holds an encrypted
	// file (post-processing's password=1), as some real posts do.
	passwordedEvery = 10
)

var words = []string{
	"ubuntu", "debian", "sunrise", "harbor", "atlas", "granite", "meadow", "falcon",
	"cobalt", "orchid", "summit", "lantern", "tundra", "voyager", "quartz", "willow",
	"delta", "ember", "fjord", "glacier", "horizon", "island", "jade", "kestrel",
}

var posters = []string{
	`Anonymous <anon@example.invalid>`,
	`yEncBin Poster <poster@example.invalid>`,
	`"Binary Bob" <bob@news.example.invalid>`,
	`powerpost@example.invalid (PowerPost)`,
	`Newsposter <np-8f3a@example.invalid>`,
}

// groupSeed derives a group's generator seed from its name.
func groupSeed(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// mix is a small stateless hash (splitmix64's finaliser).
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// genArticle describes generated article n of a group; everything derives
// from (seed, n), so nothing is stored.
type genArticle struct {
	n        int64
	seed     uint64
	partSize int
	relName  string // the release name when already known (see releaseCache)
}

// releaseCache remembers the last release name: consecutive articles
// share a release, and building the name dominated the cost of OVER.
type releaseCache struct {
	seed uint64
	idx  int64
	name string
}

// gen returns article n with its release name filled in.
func (rc *releaseCache) gen(n int64, seed uint64, partSize int) genArticle {
	a := genArticle{n: n, seed: seed, partSize: partSize}
	idx := (n - 1) / (partsPerFile * filesPerRelease)
	if rc.name == "" || rc.seed != seed || rc.idx != idx {
		_, rc.name = a.release()
		rc.seed, rc.idx = seed, idx
	}
	a.relName = rc.name
	return a
}

func (a genArticle) release() (idx int64, name string) {
	idx = (a.n - 1) / (partsPerFile * filesPerRelease)
	if a.relName != "" {
		return idx, a.relName
	}
	return idx, releaseName(mix(a.seed ^ uint64(idx)))
}

// The quality tags of generated names, each as a scene release writes it.
// The lists hold SD, HD and UHD tags and one that names no quality, so
// that generated TV and films fill every subcategory the indexer assigns
// (Sonarr asks for 5030,5040, Radarr for 2000 and its children).
var (
	tvQualities = []string{
		"480p.WEB.x264", "HDTV.XviD", "SDTV.x264", "720p.HDTV.x264", "720p.WEBRip.x264",
		"1080p.WEB-DL.DDP5.1.H.264", "1080p.WEBRip.x265", "2160p.WEB-DL.DDP5.1.HDR.H.265", "WEB.h264",
	}
	movieQualities = []string{
		"480p.WEB.x264", "DVDRip.XviD", "720p.BluRay.x264", "1080p.BluRay.x264", "1080p.WEB-DL.DDP5.1.H.264",
		"2160p.UHD.BluRay.x265", "1080p.BluRay.REMUX.AVC.DTS-HD.MA.5.1", "1080p.3D.HSBS.BluRay.x264", "WEB.h264",
	}
)

// releaseName builds a release name from the hash h, shaped like a real
// scene release: TV episodes (S01E02) and daily shows (2025.03.14) with
// quality tags, films with a year, music, books and audiobooks. The
// release group at the end is a base-36 number from h, which keeps names
// of different releases apart (a release is keyed by poster and name).
func releaseName(h uint64) string {
	h2 := mix(h)
	word := func(i uint) string {
		w := words[(h2>>(5*i))%uint64(len(words))]
		return strings.ToUpper(w[:1]) + w[1:]
	}
	num := func(shift uint, lo, n uint64) string {
		v := lo + (h2>>shift)%n
		if v < 10 {
			return "0" + strconv.FormatUint(v, 10)
		}
		return strconv.FormatUint(v, 10)
	}
	pick := func(list []string) string { return list[(h2>>40)%uint64(len(list))] }
	group := "-" + strings.ToUpper(strconv.FormatUint(h>>40, 36))
	switch k := h % 20; {
	case k < 9: // an episode
		return word(0) + "." + word(1) + ".S" + num(20, 1, 9) + "E" + num(24, 1, 24) + "." + pick(tvQualities) + group
	case k < 11: // a daily show
		return word(0) + "." + word(1) + ".2025." + num(20, 1, 12) + "." + num(24, 1, 28) + "." + pick(tvQualities) + group
	case k < 16: // a film
		return word(0) + "." + word(1) + "." + word(2) + "." + strconv.FormatUint(1980+(h2>>20)%46, 10) + "." + pick(movieQualities) + group
	case k < 17: // lossless music
		return word(0) + "_" + word(1) + "-" + word(2) + "_" + word(3) + "-WEB-FLAC-" + strconv.FormatUint(1990+(h2>>20)%36, 10) + group
	case k < 18: // MP3
		return word(0) + "_" + word(1) + "-" + word(2) + "_" + word(3) + "-WEB-" + strconv.FormatUint(1990+(h2>>20)%36, 10) + "-MP3-320kbps" + group
	case k < 19: // an ebook or a comic
		if h2>>60&1 == 0 {
			return word(0) + "_" + word(1) + "-" + word(2) + "_" + word(3) + "-" + strconv.FormatUint(2000+(h2>>20)%26, 10) + "-RETAIL.EPUB.eBook" + group
		}
		return word(0) + "." + word(1) + "." + num(24, 1, 99) + "." + strconv.FormatUint(2000+(h2>>20)%26, 10) + ".Digital.Comic.CBZ" + group
	default: // an audiobook
		return word(0) + "_" + word(1) + "-" + word(2) + "_" + word(3) + "-Unabridged-" + strconv.FormatUint(2000+(h2>>20)%26, 10) + "-MP3" + group
	}
}

// part returns the file number (1-based) and the part number within it.
func (a genArticle) part() (file, part int) {
	k := int((a.n - 1) % (partsPerFile * filesPerRelease))
	return k/partsPerFile + 1, k%partsPerFile + 1
}

func (a genArticle) appendSubject(b []byte) []byte {
	_, name := a.release()
	file, part := a.part()
	b = append(b, name...)
	b = append(b, ` - "`...)
	b = append(b, name...)
	b = append(b, ".part"...)
	if file < 10 {
		b = append(b, '0')
	}
	b = strconv.AppendInt(b, int64(file), 10)
	b = append(b, `.rar" yEnc (`...)
	b = strconv.AppendInt(b, int64(part), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, partsPerFile, 10)
	b = append(b, ") "...)
	return strconv.AppendInt(b, int64(a.partSize)*partsPerFile, 10)
}

func (a genArticle) from() string {
	idx, _ := a.release()
	return posters[mix(a.seed+uint64(idx))%uint64(len(posters))]
}

func (a genArticle) appendDate(b []byte) []byte {
	return time.Unix(baseUnix+a.n*7, 0).UTC().AppendFormat(b, time.RFC1123Z)
}

func (a genArticle) appendMessageID(b []byte) []byte {
	file, part := a.part()
	b = append(b, "<part"...)
	b = strconv.AppendInt(b, int64(part), 10)
	b = append(b, "of"...)
	b = strconv.AppendInt(b, partsPerFile, 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(file), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, a.n, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, a.seed, 36)
	return append(b, "@nntptest.invalid>"...)
}

// bodyLines is the number of body lines: =ybegin, =ypart, data, =yend.
func (a genArticle) bodyLines() int64 {
	return int64((a.partSize+yencLineLen-1)/yencLineLen) + 3
}

// bodyBytes is the size of the body as stored (CRLF line ends, not
// dot-stuffed): random data is drawn from characters that need no escape,
// so only the escapes of a volume's headers count beyond the data, and the
// size is known without generating the data.
func (a genArticle) bodyBytes(b []byte) int64 {
	n := int64(a.partSize) + 2*int64((a.partSize+yencLineLen-1)/yencLineLen)
	for _, c := range a.head() {
		if yencEscaped(c + 42) {
			n++
		}
	}
	b = a.appendYBegin(b[:0])
	n += int64(len(b)) + 2
	b = a.appendYPart(b[:0])
	n += int64(len(b)) + 2
	b = a.appendYEnd(b[:0])
	return n + int64(len(b)) + 2
}

func (a genArticle) fileName() string {
	_, name := a.release()
	file, _ := a.part()
	s := strconv.Itoa(file)
	if file < 10 {
		s = "0" + s
	}
	return name + ".part" + s + ".rar"
}

func (a genArticle) appendYBegin(b []byte) []byte {
	_, part := a.part()
	b = append(b, "=ybegin part="...)
	b = strconv.AppendInt(b, int64(part), 10)
	b = append(b, " total="...)
	b = strconv.AppendInt(b, partsPerFile, 10)
	b = append(b, " line=128 size="...)
	b = strconv.AppendInt(b, int64(a.partSize)*partsPerFile, 10)
	b = append(b, " name="...)
	return append(b, a.fileName()...)
}

func (a genArticle) appendYPart(b []byte) []byte {
	_, part := a.part()
	begin := int64(part-1)*int64(a.partSize) + 1
	b = append(b, "=ypart begin="...)
	b = strconv.AppendInt(b, begin, 10)
	b = append(b, " end="...)
	return strconv.AppendInt(b, begin+int64(a.partSize)-1, 10)
}

func (a genArticle) appendYEnd(b []byte) []byte {
	_, part := a.part()
	b = append(b, "=yend size="...)
	b = strconv.AppendInt(b, int64(a.partSize), 10)
	b = append(b, " part="...)
	return strconv.AppendInt(b, int64(part), 10)
}

// yencAlphabet holds the characters generated data lines use: printable,
// never needing a yEnc escape, '.' included so lines starting with a dot
// exercise dot-stuffing.
const yencAlphabet = "!#$%&'()*+,-./0123456789:;<>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_`abcdefghijklmnopqrstuvwxyz{|}~"

// eachBodyLine calls fn with every body line (no line end). line is reused.
func (a genArticle) eachBodyLine(fn func(line []byte) error) error {
	buf := make([]byte, 0, 256)
	if err := fn(a.appendYBegin(buf[:0])); err != nil {
		return err
	}
	if err := fn(a.appendYPart(buf[:0])); err != nil {
		return err
	}
	head := a.head()
	state := mix(a.seed ^ uint64(a.n)<<1)
	for left := a.partSize; left > 0; left -= yencLineLen {
		n := min(left, yencLineLen)
		buf = buf[:0]
		for i := 0; i < n; i++ {
			state = state*6364136223846793005 + 1442695040888963407
			if len(head) > 0 {
				// A line holds yencLineLen bytes of data whatever its
				// escapes, so the line count is known without them.
				c := head[0] + 42
				head = head[1:]
				if yencEscaped(c) {
					buf = append(buf, '=')
					c += 64
				}
				buf = append(buf, c)
				continue
			}
			buf = append(buf, yencAlphabet[(state>>33)%uint64(len(yencAlphabet))])
		}
		if err := fn(buf); err != nil {
			return err
		}
	}
	return fn(a.appendYEnd(buf[:0]))
}

// yencEscaped reports whether the generator escapes encoded character c:
// NUL, LF, CR and '=' as yEnc requires, and TAB and SPACE wherever they
// fall (a line is cut by its data's length, so any may be its last).
func yencEscaped(c byte) bool {
	switch c {
	case 0, '\n', '\r', '=', '\t', ' ':
		return true
	}
	return false
}

// head returns the decoded bytes a generated article's data starts with:
// for the first part of a rar volume, the headers of a RAR 4 volume, so
// that post-processing reads what it reads of a real post's first volume
// (the inner file's name; for one release in passwordedEvery, that the
// file is encrypted); nil for the other parts. The data after them stays
// random. Derived from (seed, n) like the rest; at most partSize bytes.
func (a genArticle) head() []byte {
	file, part := a.part()
	if part != 1 {
		return nil
	}
	idx, name := a.release()
	inner := innerName(name)
	b := make([]byte, 0, 64+len(inner))
	b = append(b, "Rar!\x1a\x07\x00"...)
	// The archive header: a volume of a set named .partNN.rar.
	const mhdVolume, mhdNewNumbering, mhdFirstVolume = 0x0001, 0x0010, 0x0100
	flags := uint16(mhdVolume | mhdNewNumbering)
	if file == 1 {
		flags |= mhdFirstVolume
	}
	b = appendRAR4Block(b, 0x73, flags, make([]byte, 6))
	// The file header of the one file the set holds, stored (RAR's -m0,
	// as posts of compressed media are), split across the volumes.
	const lhdSplitBefore, lhdSplitAfter, lhdPassword, longBlock = 0x0001, 0x0002, 0x0004, 0x8000
	flags = longBlock
	if file > 1 {
		flags |= lhdSplitBefore
	}
	if file < filesPerRelease {
		flags |= lhdSplitAfter
	}
	if mix(a.seed^uint64(idx)^0x70617373)%passwordedEvery == 0 {
		flags |= lhdPassword
	}
	const fixed = 25 // PACK_SIZE .. ATTR
	pack := max(int64(a.partSize)*partsPerFile-int64(len(b)+7+fixed+len(inner)), 0)
	f := make([]byte, fixed, fixed+len(inner))
	binary.LittleEndian.PutUint32(f[0:], uint32(min(pack, math.MaxUint32)))
	binary.LittleEndian.PutUint32(f[4:], uint32(min(pack*filesPerRelease, math.MaxUint32)))
	f[8] = 2 // host OS: Windows
	// The data's CRC: made up, as the data is.
	binary.LittleEndian.PutUint32(f[9:], uint32(mix(a.seed^uint64(idx)<<3^uint64(file))))
	first := time.Unix(baseUnix+(idx*partsPerFile*filesPerRelease+1)*7, 0).UTC()
	binary.LittleEndian.PutUint32(f[13:], dosTime(first))
	f[17] = 29   // version needed to extract: 2.9
	f[18] = 0x30 // method: store
	binary.LittleEndian.PutUint16(f[19:], uint16(len(inner)))
	binary.LittleEndian.PutUint32(f[21:], 0x20) // the archive attribute
	b = appendRAR4Block(b, 0x74, flags, append(f, inner...))
	return b[:min(len(b), a.partSize)]
}

// appendRAR4Block appends a RAR 4 block of type typ: HEAD_CRC (the low 16
// bits of the CRC32 of what follows it), HEAD_TYPE, HEAD_FLAGS, HEAD_SIZE
// and body.
func appendRAR4Block(b []byte, typ byte, flags uint16, body []byte) []byte {
	start := len(b)
	b = append(b, 0, 0, typ)
	b = binary.LittleEndian.AppendUint16(b, flags)
	b = binary.LittleEndian.AppendUint16(b, uint16(7+len(body)))
	b = append(b, body...)
	binary.LittleEndian.PutUint16(b[start:], uint16(crc32.ChecksumIEEE(b[start+2:])))
	return b
}

// dosTime is t as an MS-DOS date and time, RAR 4's FTIME.
func dosTime(t time.Time) uint32 {
	return uint32(t.Year()-1980)<<25 | uint32(t.Month())<<21 | uint32(t.Day())<<16 |
		uint32(t.Hour())<<11 | uint32(t.Minute())<<5 | uint32(t.Second()/2)
}

// innerName is the name of the file inside a generated release's volumes:
// the release's name with the extension of what its name says it is.
func innerName(release string) string {
	ext := ".mkv"
	switch {
	case strings.Contains(release, "-FLAC-"):
		ext = ".flac"
	case strings.Contains(release, "-MP3"):
		ext = ".mp3"
	case strings.Contains(release, ".EPUB."):
		ext = ".epub"
	case strings.Contains(release, ".CBZ-"):
		ext = ".cbz"
	}
	return release + ext
}
