package usenet

// Article is one overview line's fields that indexing uses.
type Article struct {
	Number     int64
	Subject    Subject
	RawSubject string
	From       string
	Date       int64
	MessageID  string
	Bytes      int64
	Groups     []string
}

// ParseArticle is a stand-in until the parser lands.
func ParseArticle(line []byte, group string) (Article, error) { return Article{}, nil }
