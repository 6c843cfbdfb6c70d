// Package testpost posts binaries to a news server the way real posters
// (nyuu, ngPost) do, for tests that need real binary posts: files split
// into yEnc parts, one article per part with the usual subject, and a
// record of what was posted (message-ids, sizes) to build an NZB from.
package testpost

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/usenet/yenc"
)

// Defaults of Options.
const (
	// PartSizeDefault is the decoded size of one article, as real posters
	// use (700 KiB).
	PartSizeDefault = 700 << 10
	// TitleDefault starts every subject when Options.Title is empty.
	TitleDefault = "switchyard test post"
	// DomainDefault is the right-hand side of the message-ids.
	DomainDefault = "switchyard.test"
)

// File is one file to post.
type File struct {
	Name string
	Data []byte
}

// Options tune PostFiles.
type Options struct {
	// Title starts each subject. Empty means TitleDefault.
	Title string
	// PartSize is the decoded size of one article. Zero means
	// PartSizeDefault; tests use a few KiB to get many parts cheaply.
	PartSize int
	// Crosspost lists further groups every article is posted to (the
	// Newsgroups header holds them all).
	Crosspost []string
	// Date is the Date header of every article. Zero means time.Now().
	Date time.Time
	// Domain ends the message-ids. Empty means DomainDefault.
	Domain string
	// RandomSubjects gives every article a subject of 24 random hex digits
	// and nothing else, as obfuscating posters do: no title, name or
	// counter.
	RandomSubjects bool
}

func (o Options) withDefaults() Options {
	if o.Title == "" {
		o.Title = TitleDefault
	}
	if o.PartSize <= 0 {
		o.PartSize = PartSizeDefault
	}
	if o.Date.IsZero() {
		o.Date = time.Now()
	}
	if o.Domain == "" {
		o.Domain = DomainDefault
	}
	return o
}

// Posted is one posted file.
type Posted struct {
	Name    string
	Size    int64  // bytes of the file
	Subject string // the subject of its first part (the NZB's subject)
	Poster  string
	Groups  []string // every group it went to, the main one first
	Date    time.Time
	Parts   []Part
}

// Part is one posted article of a file.
type Part struct {
	Number    int    // 1-based
	MessageID string // with angle brackets, as in the header
	// Offset and Size locate the part's data in the file.
	Offset, Size int64
	// Bytes is the size of the article as posted (header, blank line and
	// yEnc body, CRLF line ends): the NZB segment's bytes.
	Bytes int64
}

// PostFiles posts every file to group (and Options.Crosspost) from poster,
// in order, one article per part, over c, and returns what it posted. On
// an error it returns what was posted before it.
func PostFiles(ctx context.Context, c *nntp.Conn, group, poster string, files []File, opts Options) ([]Posted, error) {
	opts = opts.withDefaults()
	if group == "" || poster == "" {
		return nil, errors.New("testpost: group and poster are required")
	}
	for _, v := range append([]string{group, poster, opts.Title}, opts.Crosspost...) {
		if strings.ContainsAny(v, "\r\n") {
			return nil, fmt.Errorf("testpost: header value %q holds a line break", v)
		}
	}
	groups := append([]string{group}, opts.Crosspost...)
	run, err := runID()
	if err != nil {
		return nil, err
	}
	date := opts.Date.UTC().Truncate(time.Second)
	out := make([]Posted, 0, len(files))
	for i, f := range files {
		parts := yenc.Split(f.Name, f.Data, opts.PartSize)
		p := Posted{Name: f.Name, Size: int64(len(f.Data)), Poster: poster, Groups: groups, Date: date}
		for _, yp := range parts {
			subject := fmt.Sprintf(`%s [%d/%d] - "%s" yEnc (%d/%d) %d`, opts.Title, i+1, len(files), f.Name, yp.Number, yp.Total, len(f.Data))
			if opts.RandomSubjects {
				var r [12]byte
				if _, err := rand.Read(r[:]); err != nil {
					return out, fmt.Errorf("testpost: subject: %w", err)
				}
				subject = hex.EncodeToString(r[:])
			}
			if yp.Number == 1 {
				p.Subject = subject
			}
			id := fmt.Sprintf("<%s.%d.%d@%s>", run, i+1, yp.Number, opts.Domain)
			data := yp.Data(f.Data, opts.PartSize)
			art, err := article(poster, groups, subject, id, date, data, yp)
			if err != nil {
				return out, fmt.Errorf("testpost: %s part %d: %w", f.Name, yp.Number, err)
			}
			if err := c.Post(ctx, bytes.NewReader(art)); err != nil {
				return out, fmt.Errorf("testpost: post %s part %d: %w", f.Name, yp.Number, err)
			}
			p.Parts = append(p.Parts, Part{
				Number: yp.Number, MessageID: id, Offset: yp.Offset, Size: int64(len(data)), Bytes: int64(len(art)),
			})
		}
		out = append(out, p)
	}
	return out, nil
}

// article renders one article: header, blank line, yEnc body.
func article(poster string, groups []string, subject, id string, date time.Time, data []byte, p yenc.Part) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: %s\r\n", poster)
	fmt.Fprintf(&b, "Newsgroups: %s\r\n", strings.Join(groups, ","))
	fmt.Fprintf(&b, "Subject: %s\r\n", subject)
	fmt.Fprintf(&b, "Message-ID: %s\r\n", id)
	fmt.Fprintf(&b, "Date: %s\r\n", date.Format(time.RFC1123Z))
	b.WriteString("X-Newsposter: switchyard testpost\r\n\r\n")
	if err := yenc.Encode(&b, data, p); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// runID is unique per PostFiles call, so message-ids never collide with an
// earlier run's on a long-lived server such as INN2.
func runID() (string, error) {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("testpost: message-id: %w", err)
	}
	return hex.EncodeToString(r[:]), nil
}
