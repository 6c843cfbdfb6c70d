package work

import (
	"slices"
	"strings"

	"github.com/switchyard-dev/switchyard/persist"
)

func sortByKey(ms []persist.Message) {
	slices.SortFunc(ms, func(a, b persist.Message) int { return strings.Compare(a.Key, b.Key) })
}
