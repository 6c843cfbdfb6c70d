package textwidth

import (
	"bytes"
	"io"
	"strings"
)

// Table lines up tab-separated cells in columns by their width in terminal
// columns (String). It lays text out as text/tabwriter does with the pad
// character ' ' and no flags, so text whose every rune takes one column
// comes out byte for byte as tabwriter's; tabwriter counts runes, which
// misaligns every column after a cell holding wide characters (CJK, most
// emoji) or combining marks.
//
// As in tabwriter, a tab ends a cell and a newline ends a line; the last
// cell of a line is in no column (nothing after it needs lining up); a
// column is as wide as its widest cell plus the padding, over a block of
// consecutive lines that have a cell in it, so a line with fewer cells
// (a blank line, a title) starts new blocks below it. '\v', '\f' and
// tabwriter's escape byte have no special meaning here.
//
// Text is kept until Flush, which lays it out and writes it. A Table is not
// safe for concurrent use.
type Table struct {
	out     io.Writer
	padding int
	buf     []byte
}

// NewTable returns a Table that writes to out and puts at least padding
// spaces after the widest cell of each column.
func NewTable(out io.Writer, padding int) *Table {
	return &Table{out: out, padding: padding}
}

// Write keeps p for Flush; it never fails.
func (t *Table) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	return len(p), nil
}

// Flush lays out the text written since the last Flush and writes it to
// the underlying writer, returning that writer's error. Text after the
// last newline is written as it is, without one.
func (t *Table) Flush() error {
	if len(t.buf) == 0 {
		return nil
	}
	lines := strings.Split(string(t.buf), "\n")
	t.buf = t.buf[:0]
	l := layout{padding: t.padding, lines: make([][]string, len(lines))}
	for i, line := range lines {
		l.lines[i] = strings.Split(line, "\t")
	}
	// An unfinished last line ends with the text after its last tab, as a
	// line ends with its last cell; when that text is empty there is no
	// such cell (tabwriter's rule), so the cell before it is not padded.
	last := &l.lines[len(lines)-1]
	if n := len(*last); (*last)[n-1] == "" {
		*last = (*last)[:n-1]
	}
	l.format(0, len(lines))
	_, err := t.out.Write(l.out.Bytes())
	return err
}

// layout is one Flush's work: tabwriter's algorithm, with widths measured
// by String.
type layout struct {
	padding int
	lines   [][]string // each line's cells; the last cell is in no column
	widths  []int      // of the columns of the block being formatted
	out     bytes.Buffer
}

// format writes lines [line0, line1), all of which have cells in the
// columns of l.widths: it finds each block of consecutive lines with a cell
// in the next column, takes its width, and formats the block with it.
func (l *layout) format(line0, line1 int) {
	column := len(l.widths)
	for this := line0; this < line1; this++ {
		if column >= len(l.lines[this])-1 {
			continue
		}
		l.writeLines(line0, this)
		line0 = this
		width := 0
		for ; this < line1 && column < len(l.lines[this])-1; this++ {
			width = max(width, String(l.lines[this][column])+l.padding)
		}
		l.widths = append(l.widths, width)
		l.format(line0, this)
		l.widths = l.widths[:len(l.widths)-1]
		line0 = this
	}
	l.writeLines(line0, line1)
}

// writeLines writes lines [line0, line1), padding each cell that is in a
// column to that column's width.
func (l *layout) writeLines(line0, line1 int) {
	for i := line0; i < line1; i++ {
		for j, cell := range l.lines[i] {
			l.out.WriteString(cell)
			if j < len(l.widths) {
				for range l.widths[j] - String(cell) {
					l.out.WriteByte(' ')
				}
			}
		}
		if i+1 < len(l.lines) {
			l.out.WriteByte('\n')
		}
	}
}
