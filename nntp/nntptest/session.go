package nntptest

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zlib"
)

// maxCommand bounds a command line (RFC 3977 says 512 octets).
const maxCommand = 512

// session is one client connection.
type session struct {
	s    *Server
	nc   net.Conn
	raw  *bufio.Reader
	r    *bufio.Reader
	w    *bufio.Writer
	fw   *flate.Writer
	buf  []byte // scratch for building lines
	gzip bool   // XFEATURE COMPRESS GZIP on

	user    string
	authed  bool
	login   int64  // Server.logins when the session logged in
	transit bool   // a ModeSwitching server before MODE READER
	group   *group // a snapshot pointer; its high is read under the lock
	current int64
	closed  bool
}

func newSession(s *Server, nc net.Conn) *session {
	se := &session{s: s, buf: make([]byte, 0, 1024), transit: s.cfg.ModeSwitching}
	se.attach(nc)
	return se
}

func (se *session) attach(nc net.Conn) {
	se.nc = nc
	se.raw = bufio.NewReaderSize(nc, 4<<10)
	se.r = se.raw
	se.w = bufio.NewWriterSize(nc, 64<<10)
}

func (se *session) printf(format string, args ...any) {
	fmt.Fprintf(se.w, format, args...)
	se.w.WriteString("\r\n")
}

func (se *session) flush() error {
	if err := se.w.Flush(); err != nil {
		return err
	}
	if se.fw != nil {
		return se.fw.Flush()
	}
	return nil
}

func (se *session) loop() {
	for !se.closed {
		line, err := se.r.ReadSlice('\n')
		if err != nil || len(line) > maxCommand {
			return
		}
		se.s.st.commands.Add(1)
		cmd := strings.TrimRight(string(line), "\r\n")
		f := se.s.getFaults()
		se.s.wait(f.Delay)
		if f.HoldOver {
			if verb, _, _ := strings.Cut(cmd, " "); strings.EqualFold(verb, "OVER") || strings.EqualFold(verb, "XOVER") {
				se.s.holdOver()
			}
		}
		if f.GarbageStatus {
			se.printf("2x0 garbage \x00 status")
		} else {
			se.handle(cmd, f)
		}
		if se.closed || se.flush() != nil {
			return
		}
	}
}

func (se *session) needAuth() bool {
	return len(se.s.cfg.Users) > 0 && !se.loggedIn()
}

// loggedIn: AUTHINFO succeeded, and ExpireLogins has not run since.
func (se *session) loggedIn() bool {
	return se.authed && se.login == se.s.logins.Load()
}

// modeReader answers MODE READER. On a mode-switching server it starts the
// reader session afresh, as innd's hand-over to nnrpd does: nnrpd knows
// nothing of a login made with innd.
func (se *session) modeReader(args string) {
	switch {
	case !strings.EqualFold(args, "READER"):
		se.printf("501 unknown mode")
	case se.s.cfg.ModeReaderNeedsAuth && se.needAuth():
		se.printf("480 authentication required")
	case se.transit:
		se.transit = false
		se.user, se.authed = "", false
		se.printf("200 nntptest reader ready (posting ok)")
	default:
		se.printf("200 reader mode, posting ok")
	}
}

func (se *session) handle(line string, f Faults) {
	verb, args, _ := strings.Cut(line, " ")
	verb = strings.ToUpper(verb)
	args = strings.TrimSpace(args)
	switch verb {
	case "QUIT":
		se.printf("205 bye")
		se.flush()
		se.closed = true
		return
	case "CAPABILITIES":
		se.capabilities()
		return
	case "MODE":
		se.modeReader(args)
		return
	case "AUTHINFO":
		se.authinfo(args)
		return
	case "STARTTLS":
		se.startTLS()
		return
	case "DATE":
		se.printf("111 %s", time.Now().UTC().Format("20060102150405"))
		return
	}
	if se.transit {
		switch verb {
		case "COMPRESS", "XFEATURE", "GROUP", "LIST", "OVER", "XOVER", "HEAD", "BODY", "ARTICLE", "STAT", "POST":
			// innd's answer to reader commands from a peer.
			se.printf("401 MODE-READER")
		default:
			se.printf("500 unknown command")
		}
		return
	}
	if se.needAuth() {
		se.printf("480 authentication required")
		return
	}
	switch verb {
	case "COMPRESS":
		se.compress(args)
	case "XFEATURE":
		if !se.s.cfg.NoCompress && strings.HasPrefix(strings.ToUpper(args), "COMPRESS GZIP") {
			se.gzip = true
			se.printf("290 feature enabled")
		} else {
			se.printf("500 unknown feature")
		}
	case "GROUP":
		se.groupCmd(args)
	case "LIST":
		se.list(args)
	case "OVER", "XOVER":
		se.over(verb, args, f)
	case "HEAD", "BODY", "ARTICLE", "STAT":
		se.article(verb, args, f)
	case "POST":
		se.post()
	default:
		se.printf("500 unknown command")
	}
}

func (se *session) capabilities() {
	se.printf("101 capability list follows")
	se.printf("VERSION 2")
	if se.transit {
		se.printf("MODE-READER")
	} else {
		se.printf("READER")
		se.printf("POST")
		se.printf("OVER")
		se.printf("HDR")
		se.printf("LIST ACTIVE OVERVIEW.FMT")
	}
	if se.needAuth() {
		se.printf("AUTHINFO USER")
	}
	if se.s.cfg.TLS != nil && !se.s.cfg.ImplicitTLS {
		if _, ok := se.nc.(*tls.Conn); !ok {
			se.printf("STARTTLS")
		}
	}
	if !se.s.cfg.NoCompress && !se.s.cfg.NoDeflate && se.fw == nil && !se.transit {
		se.printf("COMPRESS DEFLATE")
	}
	se.printf("IMPLEMENTATION nntptest")
	se.printf(".")
}

func (se *session) authinfo(args string) {
	sub, val, _ := strings.Cut(args, " ")
	switch strings.ToUpper(sub) {
	case "USER":
		if se.loggedIn() {
			se.printf("502 already authenticated")
			return
		}
		se.user = val
		se.printf("381 password required")
	case "PASS":
		if se.user == "" {
			se.printf("482 AUTHINFO USER first")
			return
		}
		if pass, ok := se.s.cfg.Users[se.user]; ok && pass == val {
			se.authed, se.login = true, se.s.logins.Load()
			se.printf("281 authentication accepted")
			return
		}
		se.printf("481 authentication failed")
	default:
		se.printf("501 unknown AUTHINFO")
	}
}

func (se *session) startTLS() {
	if se.s.cfg.TLS == nil || se.s.cfg.ImplicitTLS {
		se.printf("580 TLS not available")
		return
	}
	if _, ok := se.nc.(*tls.Conn); ok {
		se.printf("502 already using TLS")
		return
	}
	se.printf("382 continue with TLS negotiation")
	if se.flush() != nil {
		se.closed = true
		return
	}
	tc := tls.Server(se.nc, se.s.cfg.TLS)
	se.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		se.closed = true
		return
	}
	se.nc.SetDeadline(time.Time{})
	se.attach(tc)
}

func (se *session) compress(args string) {
	if se.s.cfg.NoCompress || se.s.cfg.NoDeflate || !strings.EqualFold(args, "DEFLATE") {
		se.printf("503 compression not available")
		return
	}
	if se.fw != nil {
		se.printf("502 compression already active")
		return
	}
	se.printf("206 compression active")
	if se.flush() != nil {
		se.closed = true
		return
	}
	fw, _ := flate.NewWriter(se.nc, flate.BestSpeed)
	se.fw = fw
	se.w = bufio.NewWriterSize(fw, 64<<10)
	se.r = bufio.NewReaderSize(flate.NewReaderOpts(se.raw, flate.WithPartialBlock()), 4<<10)
}

func (se *session) lookupGroup(name string) *group {
	se.s.mu.RLock()
	defer se.s.mu.RUnlock()
	return se.s.groups[name]
}

// bounds reads a group's marks under the lock (groups grow concurrently).
func (se *session) bounds(g *group) (low, high int64) {
	se.s.mu.RLock()
	defer se.s.mu.RUnlock()
	return g.low, g.high
}

func (se *session) groupCmd(name string) {
	g := se.lookupGroup(name)
	if g == nil {
		se.printf("411 no such group")
		return
	}
	se.group = g
	low, high := se.bounds(g)
	if high < low {
		se.current = 0
		se.printf("211 0 %d %d %s", low, low-1, name)
		return
	}
	se.current = low
	se.printf("211 %d %d %d %s", high-low+1, low, high, name)
}

func (se *session) list(args string) {
	kw, arg, _ := strings.Cut(args, " ")
	switch strings.ToUpper(kw) {
	case "", "ACTIVE":
		se.printf("215 list of newsgroups follows")
		for _, g := range se.s.sortedGroups() {
			if arg != "" && !wildmatMatch(arg, g.name) {
				continue
			}
			se.printf("%s %010d %010d y", g.name, g.high, g.low)
		}
		se.printf(".")
	case "OVERVIEW.FMT":
		se.printf("215 order of fields in overview database")
		for _, f := range []string{"Subject:", "From:", "Date:", "Message-ID:", "References:", ":bytes", ":lines", "Xref:full"} {
			se.printf("%s", f)
		}
		se.printf(".")
	default:
		se.printf("501 unknown LIST keyword")
	}
}

// parseRange parses "n", "n-" or "n-m" for OVER.
func parseRange(s string, high int64) (first, last int64, ok bool) {
	a, b, dash := strings.Cut(s, "-")
	first, err := strconv.ParseInt(a, 10, 64)
	if err != nil || first < 0 {
		return 0, 0, false
	}
	switch {
	case !dash:
		last = first
	case b == "":
		last = high
	default:
		last, err = strconv.ParseInt(b, 10, 64)
		if err != nil {
			return 0, 0, false
		}
	}
	return first, last, true
}

// cutWriter counts body lines of one response and cuts the connection
// after Faults.CutAfter of them.
type cutWriter struct {
	se    *session
	left  int // lines before the cut; <= 0 means never
	lines int
}

// line writes one body line, dot-stuffed. It reports false once the
// connection has been cut.
func (cw *cutWriter) line(b []byte) bool {
	if cw.left > 0 {
		if cw.lines >= cw.left {
			cw.se.flush()
			cw.se.nc.Close()
			cw.se.closed = true
			return false
		}
	}
	cw.lines++
	w := cw.se.w
	if len(b) > 0 && b[0] == '.' {
		w.WriteByte('.')
	}
	w.Write(b)
	w.WriteString("\r\n")
	return true
}

func (se *session) over(verb, args string, f Faults) {
	if se.group == nil {
		se.printf("412 no newsgroup selected")
		return
	}
	low, high := se.bounds(se.group)
	var first, last int64
	if args == "" {
		if se.current == 0 {
			se.printf("420 no current article")
			return
		}
		first, last = se.current, se.current
	} else {
		var ok bool
		if first, last, ok = parseRange(args, high); !ok {
			se.printf("501 bad range")
			return
		}
	}
	first = max(first, low)
	last = min(last, high)
	if first > last {
		se.printf("423 no articles in that range")
		return
	}
	if se.gzip && verb == "XOVER" {
		se.overGzip(first, last, f)
		return
	}
	se.printf("224 overview information follows")
	cw := &cutWriter{se: se, left: f.CutAfter}
	se.overLines(first, last, f, cw.line)
	if !se.closed {
		se.printf(".")
	}
}

// overGzip sends the block zlib-compressed, then a plain "." terminator,
// as XFEATURE COMPRESS GZIP TERMINATOR servers do.
func (se *session) overGzip(first, last int64, f Faults) {
	se.printf("224 overview information follows [COMPRESS=GZIP]")
	zw := zlib.NewWriter(se.w)
	plain := se.w
	se.w = bufio.NewWriterSize(zw, 32<<10)
	cw := &cutWriter{se: se, left: f.CutAfter}
	se.overLines(first, last, f, cw.line)
	if se.closed {
		return
	}
	se.printf(".")
	se.w.Flush()
	zw.Close()
	se.w = plain
	se.printf(".")
}

func (se *session) overLines(first, last int64, f Faults, emit func([]byte) bool) {
	g := se.group
	partSize := se.s.cfg.PartSize
	var scratch []byte
	var rc releaseCache
	for n := first; n <= last; n++ {
		b := se.buf[:0]
		if f.GarbageEvery > 0 && (n-first+1)%int64(f.GarbageEvery) == 0 {
			b = append(b, "garbage\tnot an overview line"...)
		} else if p := se.posted(g, n); p != nil {
			b = p.appendOverview(b)
		} else {
			b, scratch = appendGenOverview(b, scratch, rc.gen(n, g.seed, partSize), g.name)
		}
		se.buf = b
		// n == last ends the walk before n++ could wrap past 2^63-1.
		if !emit(b) || n == last {
			return
		}
	}
}

func (se *session) posted(g *group, n int64) *storedArticle {
	se.s.mu.RLock()
	defer se.s.mu.RUnlock()
	if len(g.posted) == 0 {
		return nil
	}
	return g.posted[n]
}

// appendGenOverview renders generated article a as an overview line.
func appendGenOverview(b, scratch []byte, a genArticle, groupName string) ([]byte, []byte) {
	b = strconv.AppendInt(b, a.n, 10)
	b = append(b, '\t')
	b = a.appendSubject(b)
	b = append(b, '\t')
	b = append(b, a.from()...)
	b = append(b, '\t')
	b = a.appendDate(b)
	b = append(b, '\t')
	b = a.appendMessageID(b)
	b = append(b, "\t\t"...)
	scratch = appendGenHeader(scratch[:0], a, groupName)
	b = strconv.AppendInt(b, int64(len(scratch))+2+a.bodyBytes(scratch[len(scratch):]), 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, a.bodyLines(), 10)
	b = append(b, "\tXref: nntptest "...)
	b = append(b, groupName...)
	b = append(b, ':')
	b = strconv.AppendInt(b, a.n, 10)
	return b, scratch
}

// appendGenHeader renders the header block of a generated article (CRLF
// line ends, no blank line).
func appendGenHeader(b []byte, a genArticle, groupName string) []byte {
	b = append(b, "Path: nntptest!not-for-mail\r\nFrom: "...)
	b = append(b, a.from()...)
	b = append(b, "\r\nNewsgroups: "...)
	b = append(b, groupName...)
	b = append(b, "\r\nSubject: "...)
	b = a.appendSubject(b)
	b = append(b, "\r\nDate: "...)
	b = a.appendDate(b)
	b = append(b, "\r\nMessage-ID: "...)
	b = a.appendMessageID(b)
	b = append(b, "\r\nLines: "...)
	b = strconv.AppendInt(b, a.bodyLines(), 10)
	b = append(b, "\r\nXref: nntptest "...)
	b = append(b, groupName...)
	b = append(b, ':')
	b = strconv.AppendInt(b, a.n, 10)
	return append(b, "\r\n"...)
}

// resolve finds the article an id names: a number in the current group,
// a message-id, or (empty) the current article.
func (se *session) resolve(id string) (g *group, n int64, p *storedArticle, code string) {
	if strings.HasPrefix(id, "<") {
		se.s.mu.RLock()
		p = se.s.byID[id]
		se.s.mu.RUnlock()
		if p != nil {
			return p.group, p.number, p, ""
		}
		// Generated ids end in ".<n>.<seed base36>@nntptest.invalid>".
		local, _, _ := strings.Cut(strings.TrimPrefix(id, "<"), "@")
		parts := strings.Split(local, ".")
		if len(parts) >= 4 {
			n, err1 := strconv.ParseInt(parts[len(parts)-2], 10, 64)
			seed, err2 := strconv.ParseUint(parts[len(parts)-1], 36, 64)
			if err1 == nil && err2 == nil {
				se.s.mu.RLock()
				for _, cand := range se.s.groups {
					if cand.seed == seed && n >= cand.low && n <= cand.high {
						g = cand
					}
				}
				se.s.mu.RUnlock()
				if g != nil {
					return g, n, se.posted(g, n), ""
				}
			}
		}
		return nil, 0, nil, "430 no such article"
	}
	if se.group == nil {
		return nil, 0, nil, "412 no newsgroup selected"
	}
	if id == "" {
		if se.current == 0 {
			return nil, 0, nil, "420 no current article"
		}
		n = se.current
	} else {
		var err error
		if n, err = strconv.ParseInt(id, 10, 64); err != nil {
			return nil, 0, nil, "501 bad article number"
		}
	}
	low, high := se.bounds(se.group)
	if n < low || n > high {
		return nil, 0, nil, "423 no such article number"
	}
	if id != "" {
		se.current = n
	}
	return se.group, n, se.posted(se.group, n), ""
}

func (se *session) article(verb, id string, f Faults) {
	g, n, p, refusal := se.resolve(id)
	if refusal != "" {
		se.printf("%s", refusal)
		return
	}
	a := genArticle{n: n, seed: g.seed, partSize: se.s.cfg.PartSize}
	var msgID string
	if p != nil {
		msgID = p.messageID
	} else {
		msgID = string(a.appendMessageID(nil))
	}
	codes := map[string]int{"ARTICLE": 220, "HEAD": 221, "BODY": 222, "STAT": 223}
	se.printf("%d %d %s", codes[verb], n, msgID)
	if verb == "STAT" {
		return
	}
	cw := &cutWriter{se: se, left: f.CutAfter}
	if verb != "BODY" {
		var head []byte
		if p != nil {
			head = p.header
		} else {
			head = appendGenHeader(nil, a, g.name)
		}
		for _, l := range bytes.SplitAfter(head, []byte("\r\n")) {
			if len(l) == 0 {
				continue
			}
			if !cw.line(bytes.TrimSuffix(l, []byte("\r\n"))) {
				return
			}
		}
	}
	if verb == "ARTICLE" {
		if !cw.line(nil) {
			return
		}
	}
	if verb != "HEAD" {
		if p != nil {
			for _, l := range p.body {
				if !cw.line(l) {
					return
				}
			}
		} else {
			_ = a.eachBodyLine(func(l []byte) error {
				if !cw.line(l) {
					return net.ErrClosed
				}
				return nil
			})
			if se.closed {
				return
			}
		}
	}
	se.printf(".")
}

// wildmatMatch matches name against an RFC 3977 wildmat: comma-separated
// patterns, the last one that matches deciding, a leading '!' negating.
func wildmatMatch(wildmat, name string) bool {
	match := false
	for _, p := range strings.Split(wildmat, ",") {
		neg := strings.HasPrefix(p, "!")
		if ok, _ := path.Match(strings.TrimPrefix(p, "!"), name); ok {
			match = !neg
		}
	}
	return match
}
