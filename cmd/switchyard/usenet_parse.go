package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/usenet"
)

// parseResult is what `usenet parse` prints; --json prints it as is.
type parseResult struct {
	Subject      string   `json:"subject"`
	Name         string   `json:"name"`
	Part         int      `json:"part"`
	Parts        int      `json:"parts"`
	File         int      `json:"file"`
	Files        int      `json:"files"`
	Binary       string   `json:"binary"`
	Base         string   `json:"base"`
	Groups       []string `json:"groups"`
	Category     int      `json:"category"`
	CategoryName string   `json:"category_name"`
}

// newUsenetParseCmd builds switchyard usenet parse.
func newUsenetParseCmd() *cobra.Command {
	var groups []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "parse SUBJECT",
		Short: "Show what the indexer reads from an article subject",
		Long: `Parses SUBJECT as the indexer parses every article's subject and prints the
file name, the part counter p/t, the file counter i/n ("-" when there is
none), the binary key (the subject without its part counter: every part of
one file shares it), the base (the release name every file of one post
shares) and the category of the base. The category is from the name alone
unless --group gives the groups the post was in. --json for scripts.
docs/usenet.md describes the rules.`,
		Example: `  switchyard usenet parse 'Some.Show.S01E02.720p.WEB-GRP [01/15] - "Some.Show.S01E02.720p.WEB-GRP.part01.rar" yEnc (1/50) 35651584'
  switchyard usenet parse '[04/15] - "k2j3h4g5f6.r02" yEnc (7/50)' --group alt.binaries.hdtv --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s := usenet.ParseSubject(args[0])
			cat := usenet.Categorize(groups, s.Base)
			r := parseResult{
				Subject: args[0], Name: s.Name, Part: s.Part, Parts: s.Parts, File: s.File, Files: s.Files,
				Binary: s.Binary, Base: s.Base, Groups: groups, Category: cat, CategoryName: usenet.CategoryName(cat),
			}
			if r.Groups == nil {
				r.Groups = []string{}
			}
			if asJSON {
				enc := json.NewEncoder(stdout(cmd))
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			printParse(stdout(cmd), r)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&groups, "group", nil, "categorize as posted to `GROUP` (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	return cmd
}

// printParse prints r as a table; the subject and groups are the user's (or
// a poster's), so their fields are escaped (terminalSafe).
func printParse(out io.Writer, r parseResult) {
	w := newTable(out)
	file := "-"
	if r.Files > 0 {
		file = fmt.Sprintf("%d/%d", r.File, r.Files)
	}
	fmt.Fprintf(w, "name\t%s\n", terminalSafe(r.Name))
	fmt.Fprintf(w, "part\t%d/%d\n", r.Part, r.Parts)
	fmt.Fprintf(w, "file\t%s\n", file)
	fmt.Fprintf(w, "binary\t%s\n", terminalSafe(r.Binary))
	fmt.Fprintf(w, "base\t%s\n", terminalSafe(r.Base))
	for _, g := range r.Groups {
		fmt.Fprintf(w, "group\t%s\n", terminalSafe(g))
	}
	fmt.Fprintf(w, "category\t%d %s\n", r.Category, r.CategoryName)
	w.Flush()
}
