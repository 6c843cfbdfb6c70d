package progress

import (
	"io"
	"os"
)

// IsTerminal reports whether w is a character device (a terminal), the test
// golang.org/x/term would make, without the dependency: a file, pipe or
// buffer gets plain lines.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
