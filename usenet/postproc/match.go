package postproc

import (
	"cmp"
	"crypto/md5"
	"slices"

	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/par2"
)

// yencRatio is yEnc's size over the data's, in ten-thousandths, for
// random (compressed) data: 1/64 of the bytes escaped, and a CRLF per
// 128-character line.
const yencRatio = 10315

// articleOverheadDefault is the bytes of an article beyond its encoded
// data (headers, =ybegin, =ypart and =yend lines) until one fetched
// article measured it.
const articleOverheadDefault = 600

func md5First16k(b []byte) [16]byte { return md5.Sum(b[:min(len(b), 16<<10)]) }

// estimate is f's decoded size: exact once a body said it, else from the
// article bytes of its segments.
func (rd *reader) estimate(f *file) int64 {
	if f.size > 0 {
		return f.size
	}
	over := rd.overhead
	if over == 0 {
		over = articleOverheadDefault
	}
	n := f.bytes - over*int64(len(f.bin.Segments))
	return max(n, 0) * 10000 / yencRatio
}

// matchPar2 gives the files posted under obfuscated names the names of
// the par2 index's files: a file posted or yEnc-named as one of them is
// it; then a file whose first 16 KiB (a fetched segment) hash as one; then
// a file of the exact size of only one (a fetched =ybegin's size=); then
// by size as the articles tell it, within 3 %, files of equal size (rar
// volumes) in the order they were posted ([i/n], then name), which is the
// order of their names. It runs again after every body read, since an
// exact hash or size can correct a guess.
func (rd *reader) matchPar2(files []par2.File) {
	if len(files) > len(rd.par2) {
		rd.par2 = files
	}
	entries := rd.par2
	claimed := make([]bool, len(entries))
	for _, f := range rd.files {
		f.pname = ""
	}
	claim := func(f *file, i int) {
		claimed[i] = true
		f.pname = entries[i].Name
	}
	open := func(f *file) bool { return f.pname == "" && f.kind != kindPar2 && !isPar2(f.bin.Name) }
	// By name.
	for _, f := range rd.files {
		if !open(f) {
			continue
		}
		for i, e := range entries {
			if !claimed[i] && (e.Name == f.bin.Name || e.Name == f.yname) {
				claim(f, i)
				break
			}
		}
	}
	// By the hash of the first 16 KiB.
	for _, f := range rd.files {
		if !open(f) || !f.hashd {
			continue
		}
		for i, e := range entries {
			if !claimed[i] && e.Hash16k == f.hash {
				claim(f, i)
				break
			}
		}
	}
	// By exact size, when only one entry has it.
	for _, f := range rd.files {
		if !open(f) || f.size <= 0 {
			continue
		}
		at := -1
		for i, e := range entries {
			if !claimed[i] && e.Size == f.size {
				if at >= 0 {
					at = -2
					break
				}
				at = i
			}
		}
		if at >= 0 {
			claim(f, at)
		}
	}
	// By estimated size, only for names that say nothing.
	order := make([]int, 0, len(entries))
	for i := range entries {
		if !claimed[i] {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(entries[a].Size, entries[b].Size), cmp.Compare(entries[a].Name, entries[b].Name))
	})
	for start := 0; start < len(order); {
		end := start + 1
		for end < len(order) && entries[order[end]].Size == entries[order[start]].Size {
			end++
		}
		size := entries[order[start]].Size
		tol := size*3/100 + 2<<10
		var cands []*file
		for _, f := range rd.files {
			if !open(f) || !usenet.Obfuscated(f.bin.Name) || f.yname != "" {
				continue
			}
			if d := rd.estimate(f) - size; f.size > 0 && d == 0 || f.size == 0 && d >= -tol && d <= tol {
				cands = append(cands, f)
			}
		}
		k := end - start
		if len(cands) >= k {
			slices.SortStableFunc(cands, func(a, b *file) int {
				return cmp.Compare(abs(rd.estimate(a)-size), abs(rd.estimate(b)-size))
			})
			cands = cands[:k]
			slices.SortFunc(cands, func(a, b *file) int {
				return cmp.Or(cmp.Compare(a.bin.File, b.bin.File), cmp.Compare(a.bin.Name, b.bin.Name), cmp.Compare(a.bin.ID, b.bin.ID))
			})
			for j, f := range cands {
				claim(f, order[start+j])
			}
		}
		start = end
	}
	rd.rename()
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// rename sets each file's name from what is known: the par2 index's, the
// yEnc header's, or the posted one.
func (rd *reader) rename() {
	for _, f := range rd.files {
		switch {
		case f.pname != "":
			f.name, f.real = f.pname, true
		case f.yname != "":
			f.name, f.real = f.yname, true
		default:
			f.name, f.real = f.bin.Name, false
		}
	}
}
