package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/textwidth"
	"github.com/switchyard-dev/switchyard/work"
)

// displayColumns is the terminal column at which each of cells starts on
// line, finding the cells in order.
func displayColumns(t *testing.T, line string, cells []string) []int {
	t.Helper()
	var cols []int
	at := 0
	for _, c := range cells {
		i := strings.Index(line[at:], c)
		if i < 0 {
			t.Fatalf("cell %q not in line %q after byte %d", c, line, at)
		}
		cols = append(cols, textwidth.String(line[:at+i]))
		at += i + len(c)
	}
	return cols
}

// TestPrintStatusAlignsWideNames: work status lines up its columns in the
// terminal when a group or holder name holds CJK, an emoji or a combining
// accent. (Was: text/tabwriter padded by code points, so every column
// after such a name was shifted: left by one per wide character, right by
// one per combining mark.)
func TestPrintStatusAlignsWideNames(t *testing.T) {
	t.Parallel()
	names := []string{"alt.bin", "alt.漢字", "alt.🎉party", "alt.cafe\u0301"}
	s := work.Status{Source: "s"}
	for i, n := range names {
		s.Groups = append(s.Groups, work.GroupStatus{Name: n, Low: int64(10 + i), High: int64(1000 + i), PlannedThrough: int64(500 + i)})
		s.Leases = append(s.Leases, work.LeaseStatus{Range: uint64(70 + i), Group: n, First: 1, Last: 9, Holder: "worker-" + n, Progress: int64(300 + i)})
	}
	var out strings.Builder
	printStatus(&out, s)
	lines := strings.Split(out.String(), "\n")
	rowOf := func(prefix string) string {
		t.Helper()
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		t.Fatalf("no line starting %q in:\n%s", prefix, out.String())
		return ""
	}
	check := func(table string, header []string, rows [][]string) {
		t.Helper()
		want := displayColumns(t, rowOf(header[0]), header)
		for _, cells := range rows {
			line := rowOf(cells[0])
			if got := displayColumns(t, line, cells); !slices.Equal(got, want) {
				t.Errorf("%s row %q starts its cells at columns %v, the header at %v:\n%s", table, line, got, want, out.String())
			}
		}
	}
	var groups, leases [][]string
	for i, n := range names {
		groups = append(groups, []string{n, strconv.Itoa(10 + i), strconv.Itoa(1000 + i), strconv.Itoa(500 + i)})
		leases = append(leases, []string{strconv.Itoa(70 + i), n, "1-9", "worker-" + n, strconv.Itoa(300 + i)})
	}
	check("group", []string{"GROUP", "LOW", "HIGH", "PLANNED THROUGH"}, groups)
	check("lease", []string{"LEASE", "GROUP", "ARTICLES", "HOLDER", "PROGRESS"}, leases)
}

// TestNoTabwriter: the commands print tables with newTable, not
// text/tabwriter, which pads by code points and so misaligns names holding
// wide characters or combining accents.
func TestNoTabwriter(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ast, err := parser.ParseFile(fset, f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			if imp.Path.Value == `"text/tabwriter"` {
				t.Errorf("%s imports text/tabwriter: print its tables with newTable", f)
			}
		}
	}
}
