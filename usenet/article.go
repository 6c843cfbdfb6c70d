package usenet

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/switchyard-dev/switchyard/nntp"
)

// ErrBadArticle is returned (wrapped, with the reason) for an overview line
// ParseArticle cannot use: not an overview line, or without a message-id.
var ErrBadArticle = errors.New("usenet: bad overview line")

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
	Bytes     int64
	// Groups are the groups of the Xref field, sorted and deduplicated, and
	// always the group the line was read from.
	Groups []string
}

// ParseArticle reads one OVER/XOVER line of group. A bad date is 0, not an
// error; the errors (ErrBadArticle) are for a line that is not an overview
// line or has no message-id.
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
	raw := decodeMIME(ov.Subject)
	return Article{
		Number:     ov.Number,
		Subject:    parseDecoded(raw),
		RawSubject: raw,
		From:       strings.TrimSpace(decodeMIME(ov.From)),
		Date:       ParseDate(ov.Date),
		MessageID:  id,
		Bytes:      ov.Bytes,
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
