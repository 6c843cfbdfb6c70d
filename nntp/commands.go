package nntp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zlib"
)

// Group is the answer to GROUP: the estimated article count and the low and
// high water marks.
type Group struct {
	Name      string
	Count     int64
	Low, High int64
}

// ActiveGroup is one line of LIST ACTIVE.
type ActiveGroup struct {
	Name      string
	High, Low int64
	Status    string // "y" posting allowed, "n" no posting, "m" moderated, ...
}

// Range is an inclusive range of article numbers.
type Range struct{ First, Last int64 }

func (r Range) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// Group selects a newsgroup (211).
func (c *Conn) Group(ctx context.Context, name string) (Group, error) {
	var msg string
	err := c.relogin(ctx, func() (err error) {
		_, msg, err = c.expect(ctx, "GROUP", "GROUP "+name, 211)
		return err
	})
	if err != nil {
		return Group{}, err
	}
	g, ok := parseGroupLine(msg)
	if !ok {
		err := protoErr("GROUP", []byte("211 "+msg), "malformed group response", nil)
		c.fail(err)
		return Group{}, err
	}
	return g, nil
}

// ListActive streams LIST ACTIVE [wildmat] to fn; an empty wildmat lists
// every group. An error from fn stops the callbacks and is returned.
func (c *Conn) ListActive(ctx context.Context, wildmat string, fn func(ActiveGroup) error) error {
	line := "LIST ACTIVE"
	if wildmat != "" {
		line += " " + wildmat
	}
	return c.multi(ctx, "LIST ACTIVE", line, []int{215}, func(l []byte) error {
		g, ok := parseActiveLine(l)
		if !ok {
			return protoErr("LIST ACTIVE", l, "malformed active line", nil)
		}
		return fn(g)
	})
}

// OverviewFormat returns LIST OVERVIEW.FMT: the names of the overview fields
// after the article number, e.g. "Subject:", ..., ":bytes", ":lines",
// "Xref:full".
func (c *Conn) OverviewFormat(ctx context.Context) ([]string, error) {
	var out []string
	err := c.multi(ctx, "LIST OVERVIEW.FMT", "LIST OVERVIEW.FMT", []int{215}, c.held("LIST OVERVIEW.FMT", func(l []byte) error {
		out = append(out, string(l))
		return nil
	}))
	return out, err
}

// multi runs a command whose success answer is a multi-line block.
func (c *Conn) multi(ctx context.Context, cmd, line string, want []int, fn func([]byte) error) error {
	return c.relogin(ctx, func() error { return c.multiOnce(ctx, cmd, line, want, fn) })
}

func (c *Conn) multiOnce(ctx context.Context, cmd, line string, want []int, fn func([]byte) error) error {
	end, err := c.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	if err := c.send(ctx, cmd, line); err != nil {
		return err
	}
	if _, _, err := c.status(ctx, cmd, want...); err != nil {
		return err
	}
	return c.block(ctx, cmd, fn)
}

// OverLines streams the overview of articles first..last (OVER, or XOVER
// when the server lacks OVER or gzip is on) as raw dot-unstuffed lines.
// line is valid only during the call. No articles in the range (423) is
// not an error: fn is simply not called. A malformed line is the caller's
// to judge; Over parses and rejects them.
func (c *Conn) OverLines(ctx context.Context, first, last int64, fn func(line []byte) error) error {
	if first < 1 || last < first {
		return fmt.Errorf("nntp: OVER: bad range %d-%d", first, last)
	}
	return c.relogin(ctx, func() error { return c.overLines(ctx, first, last, fn) })
}

func (c *Conn) overLines(ctx context.Context, first, last int64, fn func(line []byte) error) error {
	end, err := c.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	r := Range{first, last}
	if err := c.send(ctx, c.overVerb, c.overVerb+" "+r.String()); err != nil {
		return err
	}
	err = c.overResponse(ctx, fn)
	var se *StatusError
	if errors.As(err, &se) && se.Code == 500 && c.overVerb == "OVER" {
		// An RFC 977-era server: XOVER is the same command.
		c.overVerb = "XOVER"
		if err := c.send(ctx, "XOVER", "XOVER "+r.String()); err != nil {
			return err
		}
		return c.overResponse(ctx, fn)
	}
	return err
}

// overResponse reads one OVER/XOVER answer, plain or gzip-compressed.
func (c *Conn) overResponse(ctx context.Context, fn func([]byte) error) error {
	cmd := c.overVerb
	code, msg, err := c.status(ctx, cmd, 224, 423, 420)
	if err != nil {
		return err
	}
	if code != 224 {
		return nil
	}
	if !c.gzip || !strings.Contains(strings.ToUpper(msg), "COMPRESS=GZIP") {
		return c.block(ctx, cmd, fn)
	}
	return c.gzipBlock(ctx, cmd, fn)
}

// gzipBlock reads a zlib stream holding a dot-terminated block, then the
// plain "." terminator.
func (c *Conn) gzipBlock(ctx context.Context, cmd string, fn func([]byte) error) error {
	var err error
	if c.zr == nil {
		c.zr, err = zlib.NewReader(c.raw)
	} else {
		err = c.zr.(zlib.Resetter).Reset(c.raw, nil)
	}
	if err != nil {
		perr := protoErr(cmd, nil, "bad compressed data", err)
		c.fail(perr)
		return perr
	}
	if c.zbr == nil {
		c.zbr = bufio.NewReaderSize(c.zr, readBufSize)
	} else {
		c.zbr.Reset(c.zr)
	}
	zr := lineReader{br: c.zbr, max: c.cfg.MaxLine, long: c.r.long}
	read := false
	defer func() {
		if !read {
			c.fail(errAbandoned) // as block: fn panicked
		}
	}()
	cbErr, err := readBlock(&zr, fn)
	read = true
	c.r.long = zr.long
	if err == nil {
		// Consume the zlib trailer (checksum) and demand the stream ends.
		var n int64
		n, err = io.Copy(io.Discard, c.zbr)
		if err == nil && n > 0 {
			err = errors.New("data after the compressed block")
		}
	}
	if err != nil {
		perr := protoErr(cmd, nil, "bad compressed data", err)
		c.fail(perr)
		return perr
	}
	line, err := c.r.readLine()
	if err != nil {
		return c.ioErr(ctx, cmd, err)
	}
	if !bytes.Equal(line, []byte(".")) {
		perr := protoErr(cmd, line, "missing terminator after compressed block", nil)
		c.fail(perr)
		return perr
	}
	return cbErr
}

// Over streams the parsed overview of first..last to fn, one line at a
// time; nothing but the current line is held. A malformed line ends the
// call with a *ProtocolError naming the line (the rest of the response is
// still read, so the connection stays usable).
func (c *Conn) Over(ctx context.Context, first, last int64, fn func(Overview) error) error {
	cmd := c.overVerb
	return c.OverLines(ctx, first, last, func(line []byte) error {
		ov, err := ParseOverview(line)
		if err != nil {
			return protoErr(cmd, line, "malformed overview line", err)
		}
		return fn(ov)
	})
}

// OverSeq is Over as an iterator. Stopping the loop early reads the rest of
// the response and drops it. A failure is yielded once as the last pair.
func (c *Conn) OverSeq(ctx context.Context, first, last int64) iter.Seq2[Overview, error] {
	return func(yield func(Overview, error) bool) {
		stopped := errors.New("stopped")
		done := false
		err := c.Over(ctx, first, last, func(ov Overview) error {
			if !yield(ov, nil) {
				done = true
				return stopped
			}
			return nil
		})
		// After the loop stopped, a failure to read the rest is not
		// yielded: the loop's body is over, and yield must not run again.
		if err != nil && err != stopped && !done {
			yield(Overview{}, err)
		}
	}
}

// OverPipelined fetches the overview of several ranges on this connection,
// keeping up to Config.PipelineDepth OVER commands in flight so the server
// never waits for a round trip between ranges. fn receives the lines in
// range order. A status error on one range (other than "no articles")
// ends the call once the commands already sent have been answered.
func (c *Conn) OverPipelined(ctx context.Context, ranges []Range, fn func(r Range, ov Overview) error) error {
	for _, r := range ranges {
		if r.First < 1 || r.Last < r.First {
			return fmt.Errorf("nntp: OVER: bad range %s", r)
		}
	}
	if c.overVerb == "OVER" && len(ranges) > 0 {
		// Learn whether OVER is known (else Over falls back to XOVER)
		// before sending a train of them.
		if err := c.Over(ctx, ranges[0].First, ranges[0].Last, func(ov Overview) error { return fn(ranges[0], ov) }); err != nil {
			return err
		}
		ranges = ranges[1:]
	}
	// A 480 to one range is answered to every command behind it too; fn
	// has had the ranges before it in full and nothing after it: after a
	// new login the train goes on from that range.
	return c.relogin(ctx, func() error {
		done, err := c.overTrain(ctx, ranges, fn)
		ranges = ranges[done:]
		return err
	})
}

// overTrain is OverPipelined's train of commands. done counts the ranges
// whose lines fn has had in full when the first failure came.
func (c *Conn) overTrain(ctx context.Context, ranges []Range, fn func(r Range, ov Overview) error) (done int, err error) {
	end, err := c.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer end()
	cmd := c.overVerb
	sent := 0
	done = len(ranges)
	var first error
	var denied *StatusError // first, when it is this connection's 480
	// An index loop: after a failure ranges is cut to those already sent.
	for i := 0; i < len(ranges); i++ {
		r := ranges[i]
		for ; sent < len(ranges) && sent < i+c.cfg.PipelineDepth; sent++ {
			if err := c.writeLine(cmd + " " + ranges[sent].String()); err != nil {
				return i, c.ioErr(ctx, cmd, err)
			}
		}
		if err := c.flush(); err != nil {
			return i, c.ioErr(ctx, cmd, err)
		}
		// CommandTimeout bounds each command of the train, its answer
		// included, not the whole train.
		if err := c.rearm(ctx); err != nil {
			return i, c.ioErr(ctx, cmd, err)
		}
		err := c.overResponse(ctx, func(line []byte) error {
			if first != nil {
				return first
			}
			ov, err := ParseOverview(line)
			if err != nil {
				return protoErr(cmd, line, "malformed overview line", err)
			}
			return fn(r, ov)
		})
		if err != nil {
			if c.err != nil {
				return i, err
			}
			if first == nil {
				first, done = err, i
				if se, ok := err.(*StatusError); ok && se == c.denied {
					denied = se
				}
			}
			// Answers to the commands already sent must still be read.
			ranges = ranges[:sent]
		}
	}
	if denied != nil {
		// The commands behind a 480 are refused too, and each such answer
		// replaced c.denied: relogin must see the first one, from which
		// the train resumes, as the latest, or it takes it for a refusal
		// of no login to renew.
		c.denied = denied
	}
	return done, first
}

// ArticleInfo identifies an article in a 220-223 response.
type ArticleInfo struct {
	Number    int64 // 0 when asked by message-id on servers that say so
	MessageID string
}

// HeaderField is one header of an article (continuation lines unfolded).
type HeaderField struct{ Name, Value string }

// Header is the answer to HEAD.
type Header struct {
	ArticleInfo
	Fields []HeaderField
}

// Get returns the first value of the named header (case-insensitive).
func (h Header) Get(name string) string {
	for _, f := range h.Fields {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

func parseArticleInfo(cmd, msg string) (ArticleInfo, error) {
	f := strings.Fields(msg)
	if len(f) < 2 {
		return ArticleInfo{}, protoErr(cmd, []byte(msg), "malformed article response", nil)
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n < 0 {
		return ArticleInfo{}, protoErr(cmd, []byte(msg), "bad article number", err)
	}
	return ArticleInfo{Number: n, MessageID: f[1]}, nil
}

// article runs HEAD/BODY/ARTICLE/STAT. id is a message-id in angle
// brackets, an article number, or empty for the current article.
func (c *Conn) article(ctx context.Context, verb, id string, want int, fn func([]byte) error) (ArticleInfo, error) {
	line := verb
	if id != "" {
		line += " " + id
	}
	var info ArticleInfo
	err := c.relogin(ctx, func() (err error) {
		info, err = c.articleOnce(ctx, verb, line, want, fn)
		return err
	})
	return info, err
}

func (c *Conn) articleOnce(ctx context.Context, verb, line string, want int, fn func([]byte) error) (ArticleInfo, error) {
	end, err := c.begin(ctx)
	if err != nil {
		return ArticleInfo{}, err
	}
	defer end()
	if err := c.send(ctx, verb, line); err != nil {
		return ArticleInfo{}, err
	}
	_, msg, err := c.status(ctx, verb, want)
	if err != nil {
		return ArticleInfo{}, err
	}
	info, perr := parseArticleInfo(verb, msg)
	if perr != nil {
		c.fail(perr)
		return ArticleInfo{}, perr
	}
	if fn == nil {
		return info, nil
	}
	return info, c.block(ctx, verb, fn)
}

// Stat checks that an article exists (223) without fetching it.
func (c *Conn) Stat(ctx context.Context, id string) (ArticleInfo, error) {
	return c.article(ctx, "STAT", id, 223, nil)
}

// Head fetches an article's headers (221); more than 1 MiB of them is a
// *ProtocolError that breaks the connection.
func (c *Conn) Head(ctx context.Context, id string) (Header, error) {
	var h Header
	var bad []byte
	// folded is the value of the last field while continuation lines are
	// added to it, made a string once the field is complete: appending
	// each line to the string would copy the value every time, quadratic
	// in the number of lines a server sends.
	var folded []byte
	unfold := func() {
		if folded != nil {
			h.Fields[len(h.Fields)-1].Value = string(folded)
			folded = nil
		}
	}
	info, err := c.article(ctx, "HEAD", id, 221, c.held("HEAD", func(l []byte) error {
		if len(l) > 0 && (l[0] == ' ' || l[0] == '\t') && len(h.Fields) > 0 {
			if folded == nil {
				folded = append(folded, h.Fields[len(h.Fields)-1].Value...)
			}
			folded = append(append(folded, ' '), bytes.TrimSpace(l)...)
			return nil
		}
		unfold()
		name, value, ok := bytes.Cut(l, []byte(":"))
		if !ok || len(name) == 0 {
			if bad == nil {
				bad = bytes.Clone(l)
			}
			return nil
		}
		h.Fields = append(h.Fields, HeaderField{Name: string(name), Value: strings.TrimSpace(string(value))})
		return nil
	}))
	if err != nil {
		return Header{}, err
	}
	unfold()
	if bad != nil {
		return Header{}, protoErr("HEAD", bad, "malformed header line", nil)
	}
	h.ArticleInfo = info
	return h, nil
}

// Body writes an article's body to w (222), dot-unstuffed, lines ending in
// CRLF as on the wire. Streamed: only one line is held at a time.
func (c *Conn) Body(ctx context.Context, id string, w io.Writer) (ArticleInfo, error) {
	return c.article(ctx, "BODY", id, 222, copyLines(w))
}

// Article writes the whole article, headers, blank line and body, to w
// (220) like Body.
func (c *Conn) Article(ctx context.Context, id string, w io.Writer) (ArticleInfo, error) {
	return c.article(ctx, "ARTICLE", id, 220, copyLines(w))
}

func copyLines(w io.Writer) func([]byte) error {
	return func(l []byte) error {
		if _, err := w.Write(l); err != nil {
			return err
		}
		_, err := io.WriteString(w, "\r\n")
		return err
	}
}

// Post sends an article (headers, blank line, body; LF or CRLF line ends)
// with POST: 340, then the dot-stuffed text, then 240.
func (c *Conn) Post(ctx context.Context, article io.Reader) error {
	return c.relogin(ctx, func() error { return c.post(ctx, article) })
}

func (c *Conn) post(ctx context.Context, article io.Reader) error {
	end, err := c.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	if err := c.send(ctx, "POST", "POST"); err != nil {
		return err
	}
	if _, _, err := c.status(ctx, "POST", 340); err != nil {
		return err
	}
	br := bufio.NewReader(article)
	for {
		line, rerr := br.ReadString('\n')
		if line != "" {
			line = strings.TrimRight(line, "\r\n")
			if strings.HasPrefix(line, ".") {
				line = "." + line
			}
			if err := c.writeLine(line); err != nil {
				return c.ioErr(ctx, "POST", err)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			// Closing the connection without the terminator is the only
			// way to abort a POST: a "." would have the server take the
			// truncated article.
			c.fail(rerr)
			return fmt.Errorf("nntp: POST: read article: %w", rerr)
		}
	}
	if err := c.writeLine("."); err != nil {
		return c.ioErr(ctx, "POST", err)
	}
	if err := c.flush(); err != nil {
		return c.ioErr(ctx, "POST", err)
	}
	_, _, err = c.status(ctx, "POST", 240)
	if c.authRequired(err) {
		// Not to be sent again after a new login: the article is spent.
		c.fail(err)
		return fmt.Errorf("%w (after the article; connection retired)", err)
	}
	return err
}
