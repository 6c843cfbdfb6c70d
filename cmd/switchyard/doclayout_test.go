package main

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestReadmeLayoutMatchesPackages: the package tables of the README and of
// docs/architecture.md list exactly the module's packages, so a new or
// moved package cannot go undocumented.
func TestReadmeLayoutMatchesPackages(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{"../../README.md", "../../docs/architecture.md"} {
		checkLayoutTable(t, doc)
	}
}

func checkLayoutTable(t *testing.T, doc string) {
	t.Helper()
	text, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9/]+)` \\|").FindAllStringSubmatch(string(text), -1) {
		documented = append(documented, m[1])
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		if _, rel, ok := strings.Cut(p, "/switchyard/"); ok {
			pkgs = append(pkgs, rel)
		}
	}
	slices.Sort(documented)
	slices.Sort(pkgs)
	if len(pkgs) == 0 || !slices.Equal(documented, pkgs) {
		t.Fatalf("%s package table %v\ngo list ./... %v", doc, documented, pkgs)
	}
}
