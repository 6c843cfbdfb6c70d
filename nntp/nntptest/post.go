package nntptest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// maxPostLines bounds a posted article so a runaway client cannot fill memory.
const maxPostLines = 100000

// storedArticle is a posted article, kept in memory.
type storedArticle struct {
	group      *group
	number     int64
	messageID  string
	subject    string
	from       string
	date       string
	references string
	header     []byte   // header block, CRLF line ends
	body       [][]byte // body lines, unstuffed
	bytes      int64
}

func (p *storedArticle) appendOverview(b []byte) []byte {
	clean := func(s string) string { return strings.NewReplacer("\t", " ", "\r", "", "\n", "").Replace(s) }
	b = strconv.AppendInt(b, p.number, 10)
	for _, f := range []string{p.subject, p.from, p.date, p.messageID, p.references} {
		b = append(b, '\t')
		b = append(b, clean(f)...)
	}
	b = append(b, '\t')
	b = strconv.AppendInt(b, p.bytes, 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(len(p.body)), 10)
	b = append(b, "\tXref: nntptest "...)
	b = append(b, p.group.name...)
	b = append(b, ':')
	return strconv.AppendInt(b, p.number, 10)
}

// post reads an article after 340 and files it in its first existing group.
func (se *session) post() {
	se.printf("340 send article to be posted")
	if se.flush() != nil {
		se.closed = true
		return
	}
	var lines [][]byte
	for {
		line, err := se.r.ReadSlice('\n')
		if err != nil {
			se.closed = true
			return
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > 0 && line[0] == '.' {
			if len(line) == 1 {
				break
			}
			line = line[1:]
		}
		if len(lines) < maxPostLines {
			lines = append(lines, bytes.Clone(line))
		}
	}
	if len(lines) >= maxPostLines {
		se.printf("441 article too long")
		return
	}
	split := len(lines)
	for i, l := range lines {
		if len(l) == 0 {
			split = i
			break
		}
	}
	hdr := textproto.MIMEHeader{}
	var head []byte
	var last string
	for _, l := range lines[:split] {
		head = append(append(head, l...), "\r\n"...)
		if (l[0] == ' ' || l[0] == '\t') && last != "" {
			vals := hdr[last]
			vals[len(vals)-1] += " " + strings.TrimSpace(string(l))
			continue
		}
		name, value, ok := strings.Cut(string(l), ":")
		if !ok {
			se.printf("441 malformed header line")
			return
		}
		last = textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name))
		hdr.Add(last, strings.TrimSpace(value))
	}
	if hdr.Get("From") == "" || hdr.Get("Subject") == "" || hdr.Get("Newsgroups") == "" {
		se.printf("441 missing From, Subject or Newsgroups")
		return
	}
	var body [][]byte
	if split < len(lines) {
		body = lines[split+1:]
	}
	msgID := hdr.Get("Message-Id")
	if msgID == "" {
		var r [8]byte
		rand.Read(r[:])
		msgID = "<" + hex.EncodeToString(r[:]) + "@nntptest.invalid>"
		head = append(head, "Message-ID: "+msgID+"\r\n"...)
	}
	date := hdr.Get("Date")
	if date == "" {
		date = time.Now().UTC().Format(time.RFC1123Z)
		head = append(head, "Date: "+date+"\r\n"...)
	}
	size := int64(len(head)) + 2
	for _, l := range body {
		size += int64(len(l)) + 2
	}

	se.s.mu.Lock()
	defer se.s.mu.Unlock()
	if _, dup := se.s.byID[msgID]; dup {
		se.printf("441 duplicate message-id")
		return
	}
	var g *group
	for _, name := range strings.Split(hdr.Get("Newsgroups"), ",") {
		if g = se.s.groups[strings.TrimSpace(name)]; g != nil {
			break
		}
	}
	if g == nil {
		se.printf("441 no such newsgroup")
		return
	}
	g.high++
	p := &storedArticle{
		group: g, number: g.high, messageID: msgID, subject: hdr.Get("Subject"), from: hdr.Get("From"),
		date: date, references: hdr.Get("References"), header: head, body: body, bytes: size,
	}
	g.posted[p.number] = p
	se.s.byID[msgID] = p
	se.printf("240 article received %s", msgID)
}
