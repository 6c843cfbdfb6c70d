package main

import (
	"io"

	"github.com/switchyard-dev/switchyard/internal/textwidth"
)

// newTable returns the writer every command prints its tables with:
// tab-separated cells lined up in columns two spaces apart, measured in
// terminal columns so that names holding wide characters (CJK, emoji) or
// combining accents do not shift the columns after them. Flush writes it.
func newTable(out io.Writer) *textwidth.Table {
	return textwidth.NewTable(out, 2)
}
