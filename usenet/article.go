package usenet

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/switchyard-dev/switchyard/nntp"
)

// ErrBadArticle is returned (wrapped, with the reason) for an overview line
// ParseArticle cannot use: not an overview line, without a message-id, or
// with a message-id longer than maxMessageIDBytes.
var ErrBadArticle = errors.New("usenet: bad overview line")

// maxMessageIDBytes is the longest message-id, angle brackets included, an
// article may have: RFC 3977 (3.6) and RFC 5536 (3.1.3) cap it at 250
// octets, so a longer one is outside the protocol (a downloader's
// "BODY <id>" for it is a command a conforming server need not take).
// Without the cap a poster could make each segment, which keeps its
// message-id, cost up to the 64 KiB of an overview line in every record,
// merge and NZB of its binary.
const maxMessageIDBytes = 250

// maxArticleBytes caps the size an overview line may give an article
// (Article.Bytes). Posting tools cut files into articles of under 1 MB and
// servers refuse articles of more than a few, so a larger number is a
// broken or hostile server's (the field is read up to 2^63-1), and a few
// such articles would make the int64 sums of a binary's and a release's
// sizes wrap negative. 1 GiB is far above any real article, and at that
// size only 2^33 articles, far more than a release's records can hold,
// overflow a sum. Sums saturate too (addBytes), for records stored before
// the cap.
const maxArticleBytes = 1 << 30

// articleBytes is an overview line's bytes as an Article keeps them.
func articleBytes(n int64) int64 { return min(n, maxArticleBytes) }

// Article is one overview line, read for the indexer.
type Article struct {
	Number  int64
	Subject Subject // parsed
	// RawSubject is the subject MIME-decoded, as posted.
	RawSubject string
	// From is the poster, MIME-decoded.
	From string
	// Date is the posting date, unix seconds; 0 when unparseable.
	Date int64
	// MessageID is the message-id without angle brackets; never "".
	MessageID string
	// Bytes is the article's size as the overview gives it, at most
	// maxArticleBytes.
	Bytes int64
	// Groups are the groups of the Xref field, sorted and deduplicated, and
	// always the group the line was read from.
	Groups []string
}

// ParseArticle reads one OVER/XOVER line of group. A bad date is 0, not an
// error; the errors (ErrBadArticle) are for a line that is not an overview
// line, has no message-id or has one of more than 250 bytes.
func ParseArticle(line []byte, group string) (Article, error) {
	ov, err := nntp.ParseOverview(line)
	if err != nil {
		return Article{}, fmt.Errorf("%w: %w", ErrBadArticle, err)
	}
	id := strings.TrimSpace(ov.MessageID)
	id = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(id, "<"), ">"))
	if id == "" {
		return Article{}, fmt.Errorf("%w: article %d has no message-id", ErrBadArticle, ov.Number)
	}
	if len(id)+2 > maxMessageIDBytes {
		return Article{}, fmt.Errorf("%w: article %d has a message-id of %d bytes, more than %d", ErrBadArticle, ov.Number, len(id)+2, maxMessageIDBytes)
	}
	raw := decodeMIME(ov.Subject)
	return Article{
		Number:     ov.Number,
		Subject:    parseDecoded(raw),
		RawSubject: raw,
		From:       strings.TrimSpace(decodeMIME(ov.From)),
		Date:       ParseDate(ov.Date),
		MessageID:  id,
		Bytes:      articleBytes(ov.Bytes),
		Groups:     xrefGroups(ov.Xref(), group),
	}, nil
}

// xrefGroups reads the groups of an Xref value ("host g1:n1 g2:n2") and
// adds group; sorted, deduplicated, without "".
func xrefGroups(xref, group string) []string {
	groups := make([]string, 0, 4)
	if group != "" {
		groups = append(groups, group)
	}
	first := true
	for f := range strings.FieldsSeq(xref) {
		if first { // the host
			first = false
			continue
		}
		if i := strings.LastIndexByte(f, ':'); i > 0 {
			groups = append(groups, f[:i])
		}
	}
	if len(groups) > 1 {
		slices.Sort(groups)
		groups = slices.Compact(groups)
	}
	return groups
}
