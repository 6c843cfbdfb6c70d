package search

import "github.com/switchyard-dev/switchyard/usenet"

// fold is usenet.Fold: the index folds the names it holds and the words
// searched for as the command line's usenet releases --q does, so both
// find the same names.
func fold(s string) string { return usenet.Fold(s) }
