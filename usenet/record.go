package usenet

// Segment is one article of a binary: its part number (from 1), its size
// in bytes and its message-id without angle brackets.
type Segment struct {
	Number int    `json:"n"`
	Bytes  int64  `json:"b"`
	ID     string `json:"id"`
	// Date is the article's posting date, unix seconds (0 when unreadable):
	// what tells two copies of one file apart (see Copy).
	Date int64 `json:"d,omitempty"`
}

// Binary is one posted file: the parts seen of it, from every group it was
// posted to. Every field is a function of the set of its articles, so that
// merging the same articles in any order gives the same record.
type Binary struct {
	ID string `json:"id"`
	// Release is the id of its Collection: every post of its poster under
	// its base name and file count.
	Release string `json:"release"`
	Poster  string `json:"poster"`
	// Subject is the subject of its lowest-numbered part, as posted.
	Subject string `json:"subject"`
	Name    string `json:"name"`
	// File and Files are its file counter [i/n] (0 when absent).
	File  int `json:"file,omitempty"`
	Files int `json:"files,omitempty"`
	// Parts is the number of parts announced (t of p/t).
	Parts int `json:"parts"`
	// Date is the earliest posting date of its parts, unix seconds.
	Date     int64     `json:"date"`
	Groups   []string  `json:"groups"`
	Segments []Segment `json:"segments"`

	// base is the Base of its subject, carried from the article to the
	// release it starts; the stored record does not need it.
	base string
}

// FileSummary is what a release keeps of one of its binaries: the copy of
// it that belongs to the release's post.
type FileSummary struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	File    int    `json:"file,omitempty"`
	Parts   int    `json:"parts"`
	Present int    `json:"present"`
	Bytes   int64  `json:"bytes"`
	// From and To are the posting dates of the copy's first and last
	// articles: its NZB lists the binary's segments of those dates only, so
	// that it never mixes two posts of a file.
	From int64 `json:"from,omitempty"`
	To   int64 `json:"to,omitempty"`
	// Posted is the name as posted when post-processing found the file's
	// real name (Name) in the bodies, else "".
	Posted string `json:"posted,omitempty"`
}

// Par2File is one file a release's par2 index describes.
type Par2File struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// Release is one post: the copies of the binaries of one poster sharing a
// base name and an announced file count that were posted together (see
// Collection.Posts). A repost is a release of its own.
type Release struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Poster   string `json:"poster"`
	Category int    `json:"category"`
	// Files is the number of files announced ([i/n]); 0 when none was.
	Files  int      `json:"files"`
	Groups []string `json:"groups"`
	// Date is the earliest posting date of its post's parts, unix seconds:
	// a repost has its own.
	Date int64 `json:"date"`
	// RepostOf is the id of the first post of its collection when this is
	// a later one (a repost), else "".
	RepostOf string `json:"repost_of,omitempty"`
	// Size is the bytes of the parts present.
	Size     int64         `json:"size"`
	Binaries []FileSummary `json:"binaries"`
	// Version counts the changes of the record; a reader of the releases
	// stream keeps the highest it has seen of a release.
	Version int64 `json:"version"`
	// Visible is set once the release is complete, or when it settled (no
	// change for the settle window) with enough of it present.
	Visible bool `json:"visible"`
	// Updated is when the record last changed, unix milliseconds: the clock
	// of the settle window.
	Updated int64 `json:"updated"`

	// What post-processing read in the release's bodies (see Processed);
	// all zero until it did.

	// Processed is set once post-processing is done with the release.
	Processed bool `json:"processed,omitempty"`
	// PostedName is the name as posted when post-processing renamed the
	// release (an obfuscated post named from its par2 index), else "".
	PostedName string `json:"posted_name,omitempty"`
	// Password is Newznab's password attr: 0 none seen, 1 passworded (an
	// encrypted RAR: its headers or its files), 2 potentially (an archive
	// inside the archive, which cannot be looked into).
	Password int `json:"password,omitempty"`
	// NFO says the release's .nfo was read and stored (Store.NFO).
	NFO bool `json:"nfo,omitempty"`
	// Par2 is the file list of its par2 index.
	Par2 []Par2File `json:"par2,omitempty"`
	// Inner is the names of the files inside its first RAR volume.
	Inner []string `json:"inner,omitempty"`
}

// FileCount is the number of files a reader should be shown: the announced
// count ([i/n]), or the files present when none was announced or more
// turned up than announced. The dashboard and the Newznab feed show this
// one number.
func (r Release) FileCount() int { return max(r.Files, len(r.Binaries)) }
