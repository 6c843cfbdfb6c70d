package usenet

// Subject is what ParseSubject extracts from an article's subject.
type Subject struct {
	// Name is the file name: the quoted name, else a token that looks like a
	// file name (has an extension), else "".
	Name string
	// Part and Parts are the part counter (p/t); 1 and 1 for a subject
	// without one (a single-part file).
	Part, Parts int
	// File and Files are the file counter [i/n]; 0 and 0 when absent.
	File, Files int
	// Binary is the subject with its part counter (and a trailing size after
	// it) removed and spaces trimmed: with the poster, it keys the binary, so
	// every part of one file has the same Binary.
	Binary string
	// Base names the post the file belongs to: with the poster and Files it
	// keys the release, so every file of one post has the same Base. It is
	// the file name stripped of volume and recovery suffixes (.partNN.rar,
	// .rNN, .volNN+NN.par2, .par2, .nfo, .sfv, .nzb, ...), or the subject's
	// text outside the counters and the name when that is what the files
	// share (obfuscated names).
	Base string
}

// ParseSubject extracts the file name, counters and keys of a subject. It
// never fails: a subject it cannot read is a single-part file named by
// nothing, whose Binary and Base are the trimmed subject.
func ParseSubject(s string) Subject {
	return Subject{Part: 1, Parts: 1, Binary: s, Base: s}
}
