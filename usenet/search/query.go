package search

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/usenet"
)

// DefaultLimit is the page size of a Query with Limit 0.
const DefaultLimit = 100

// Limits of a Query: Search refuses one over any of them with a
// *LimitError before it reads the index. They bound what one query can
// make the index do: the FTS5 expression of a query has at most MaxWords
// name terms, MaxCats category terms and one group term, whatever the
// caller sends. Real clients stay far below them: Sonarr and Radarr send a
// title and a season and episode (a few words), Prowlarr and NZBHydra a
// title and the categories of the indexer's caps (about twenty here).
const (
	// MaxWordsBytes is the most bytes Query.Words may have, checked before
	// it is split into words.
	MaxWordsBytes = 512
	// MaxWords is the most distinct words Query.Words may have; a word
	// repeated counts once (it adds nothing to an AND) and is searched
	// once.
	MaxWords = 32
	// MaxCats is the most categories Query.Cats may list (repeats
	// included).
	MaxCats = 64
	// MaxGroupBytes is the most bytes Query.Group may have.
	MaxGroupBytes = 256
)

// ErrQueryTooLarge is matched (errors.Is) by every *LimitError.
var ErrQueryTooLarge = errors.New("query over a limit")

// LimitError is the error of a Query over one of the limits.
type LimitError struct {
	// Field is the Query field over its limit: "Words", "Cats" or "Group".
	Field string
	// Limit is the limit (MaxWordsBytes, MaxWords, MaxCats or
	// MaxGroupBytes) and Unit what it counts: "bytes", "words" or
	// "categories".
	Limit int
	Unit  string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("search: %s has more than %d %s", e.Field, e.Limit, e.Unit)
}

// Is makes every LimitError match ErrQueryTooLarge.
func (e *LimitError) Is(target error) bool { return target == ErrQueryTooLarge }

// Check returns a *LimitError when q is over one of the limits, nil
// otherwise. Search checks it too; a caller checks first to name the
// parameter at fault in its own terms.
func (q Query) Check() error {
	_, err := q.words()
	return err
}

// words checks q's limits and returns its distinct words, in their order,
// folded as the names are (see fold): words that differ only in their
// accents are one. Words is measured in bytes before it is split, so that
// splitting costs at most MaxWordsBytes.
func (q Query) words() ([]string, error) {
	switch {
	case len(q.Words) > MaxWordsBytes:
		return nil, &LimitError{Field: "Words", Limit: MaxWordsBytes, Unit: "bytes"}
	case len(q.Cats) > MaxCats:
		return nil, &LimitError{Field: "Cats", Limit: MaxCats, Unit: "categories"}
	case len(q.Group) > MaxGroupBytes:
		return nil, &LimitError{Field: "Group", Limit: MaxGroupBytes, Unit: "bytes"}
	}
	words := usenet.Words(q.Words)
	seen := make(map[string]bool, len(words))
	distinct := words[:0]
	for _, w := range words {
		if w = fold(w); !seen[w] {
			seen[w] = true
			distinct = append(distinct, w)
		}
	}
	if len(distinct) > MaxWords {
		return nil, &LimitError{Field: "Words", Limit: MaxWords, Unit: "words"}
	}
	return distinct, nil
}

// Query selects releases; its conditions all hold for each result.
type Query struct {
	// Words must all occur in the release name, in any order, ignoring
	// case and diacritics, in every script (see fold). Words are split on
	// everything but letters and digits, as names are (Some.Show_S01-E02
	// is the words some show s01 e02); a combining accent stays with its
	// letter (see usenet.Words). They are plain words: quotes, *, -, :,
	// AND, NEAR( have no search meaning. Empty (or spaces alone) matches
	// every release; text that holds no word (punctuation or symbols
	// alone: "...", "-") matches none.
	Words string
	// Cats keeps releases in any of these categories; a parent (5000)
	// matches its subcategories (5040). Empty means any.
	Cats []int
	// Group keeps releases posted to this group (case-insensitive).
	Group string
	// MaxAge keeps releases posted at most this long ago. Zero means any.
	MaxAge time.Duration
	// MinAge keeps releases posted at least this long ago. Zero means any.
	MinAge time.Duration
	// MinSize and MaxSize keep releases of at least and at most this many
	// bytes (usenet.Release.Size). Zero means no bound.
	MinSize, MaxSize int64
	// Season and Episode keep releases whose name has S01E02 (or S01.E02,
	// 1x02) with these numbers; a Season alone matches the whole season:
	// its packs (S01) and its episodes. Zero means any, except for a
	// Season when HasSeason is set.
	Season, Episode int
	// HasSeason says Season is asked even when it is 0: season 0 (the
	// specials, S00E05), which Sonarr sends as season=00. A Season > 0
	// is asked whether HasSeason is set or not.
	HasSeason bool
	// Aired keeps releases whose name holds this day as year, month and
	// day in a row (Show.2026.12.02.720p, Show 2026-12-02): a daily
	// show's episode, which Sonarr asks for as season=2026&ep=12/02. Only
	// its date counts. Zero means any.
	Aired time.Time
	// HidePassworded leaves out the releases post-processing found
	// passworded (usenet.Release.Password 1).
	HidePassworded bool
	// Limit is the page size; zero means DefaultLimit. Offset skips that
	// many results.
	Limit, Offset int
}

// Result is one page of the releases a Query selects, newest first (by
// Date, then by ID).
type Result struct {
	// Total is how many releases the query selects, over all pages.
	Total    int
	Releases []usenet.Release
}

// Search runs q. A q over one of the limits (see Check) is refused with a
// *LimitError. The search ends when ctx does, with an error wrapping
// ctx.Err(): SQLite is interrupted in the middle of a statement (the
// driver checks every thousand steps of its program), and the loop
// reading the page checks ctx at each row. A caller bounds the time of a
// query with a context deadline.
func (ix *Index) Search(ctx context.Context, q Query) (res Result, err error) {
	if q.Limit < 0 || q.Offset < 0 {
		return Result{}, fmt.Errorf("search: negative limit %d or offset %d", q.Limit, q.Offset)
	}
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	words, err := q.words()
	if err != nil {
		return Result{}, err
	}
	if len(words) == 0 && strings.TrimSpace(q.Words) != "" {
		// Text that holds no word (q=..., q=-) is a search for words no
		// name holds, not the absence of one: listing every release for
		// it answered a typo with the whole index.
		return Result{}, nil
	}
	// An interrupted statement fails with SQLite's own "interrupted"; the
	// caller is told why, so it can tell a deadline from a failure.
	defer func() {
		if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("search: %w (%v)", ctx.Err(), err)
		}
	}()
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("search: %w", err)
	}
	match := matchExpr(q, words)
	// The ages are a range of row keys, which start with the date.
	minKey, maxKey := int64(0), int64(math.MaxInt64)
	if q.MaxAge > 0 {
		minKey = dateBase(ix.now().Add(-q.MaxAge).Unix())
	}
	if q.MinAge > 0 {
		maxKey = dateBase(ix.now().Add(-q.MinAge).Unix()) | keySlot
	}
	// The sizes are rel's: a search with them reads rel's row of each
	// match, one without them does not.
	var sized string
	var sizeArgs []any
	if q.MinSize > 0 {
		sized += ` AND rel.size >= ?`
		sizeArgs = append(sizeArgs, q.MinSize)
	}
	if q.MaxSize > 0 {
		sized += ` AND rel.size <= ?`
		sizeArgs = append(sizeArgs, q.MaxSize)
	}
	relWhere := `rk BETWEEN ? AND ?` + sized
	relArgs := append([]any{minKey, maxKey}, sizeArgs...)
	// matching is the rows of fts that match m and meet the other
	// conditions, as "FROM ..." and its arguments.
	matching := func(m string) (string, []any) {
		if sized == "" {
			return `FROM fts WHERE fts MATCH ? AND rowid BETWEEN ? AND ?`, []any{m, minKey, maxKey}
		}
		return `FROM fts JOIN rel ON rel.rk = fts.rowid WHERE fts MATCH ? AND fts.rowid BETWEEN ? AND ?` + sized,
			append([]any{m, minKey, maxKey}, sizeArgs...)
	}
	page := func(args ...any) []any { return append(slices.Clip(args), q.Limit, q.Offset) }
	// One read transaction, so the total and the page agree.
	tx, err := ix.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Result{}, fmt.Errorf("search: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var rows *sql.Rows
	hidden := ""
	if q.HidePassworded {
		hidden = "tags:" + quote(passwordTag(1))
	}
	switch {
	case match == "" && hidden != "":
		// FTS5 has no NOT without a positive term: count and page the
		// rows that are not among the passworded ones.
		var all, pw int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM rel WHERE `+relWhere, relArgs...).Scan(&all); err != nil {
			return Result{}, fmt.Errorf("search: count: %w", err)
		}
		from, args := matching(hidden)
		if err := tx.QueryRowContext(ctx, `SELECT count(*) `+from, args...).Scan(&pw); err != nil {
			return Result{}, fmt.Errorf("search: count: %w", err)
		}
		res.Total = all - pw
		rows, err = tx.QueryContext(ctx, `SELECT data FROM rel WHERE `+relWhere+` AND rk NOT IN (
			SELECT rowid FROM fts WHERE fts MATCH ? AND rowid BETWEEN ? AND ?
		) ORDER BY rk DESC LIMIT ? OFFSET ?`, page(append(relArgs, hidden, minKey, maxKey)...)...)
	case match == "":
		if minKey == 0 && maxKey == math.MaxInt64 && sized == "" {
			n, _, err := getMeta(ctx, tx, metaCount)
			if err != nil {
				return Result{}, fmt.Errorf("search: %w", err)
			}
			res.Total = int(n)
		} else if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM rel WHERE `+relWhere, relArgs...).Scan(&res.Total); err != nil {
			return Result{}, fmt.Errorf("search: count: %w", err)
		}
		rows, err = tx.QueryContext(ctx, `SELECT data FROM rel WHERE `+relWhere+` ORDER BY rk DESC LIMIT ? OFFSET ?`, page(relArgs...)...)
	default:
		if hidden != "" {
			match = "(" + match + ") NOT " + hidden
		}
		from, args := matching(match)
		if err := tx.QueryRowContext(ctx, `SELECT count(*) `+from, args...).Scan(&res.Total); err != nil {
			return Result{}, fmt.Errorf("search %q: count: %w", match, err)
		}
		// FTS5 walks its doclists in rowid order, so this reads only the
		// page, not every match (with sizes, only the matches up to the
		// page's end, each joined to its rel row by key).
		if sized == "" {
			rows, err = tx.QueryContext(ctx, `SELECT data FROM rel WHERE rk IN (
				SELECT rowid `+from+` ORDER BY rowid DESC LIMIT ? OFFSET ?
			) ORDER BY rk DESC`, page(args...)...)
		} else {
			rows, err = tx.QueryContext(ctx, `SELECT rel.data `+from+` ORDER BY fts.rowid DESC LIMIT ? OFFSET ?`, page(args...)...)
		}
	}
	if err != nil {
		return Result{}, fmt.Errorf("search: %w", err)
	}
	res.Releases, err = ix.scanReleases(ctx, rows)
	if err != nil {
		return Result{}, fmt.Errorf("search: %w", err)
	}
	return res, nil
}

// scanReleases reads the page, checking ctx before each row: decoding is
// Go's work, which no interrupt of SQLite stops.
func (ix *Index) scanReleases(ctx context.Context, rows *sql.Rows) ([]usenet.Release, error) {
	defer rows.Close()
	var out []usenet.Release
	for rows.Next() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if ix.onRow != nil {
			ix.onRow()
		}
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var r usenet.Release
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("decode release: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Get returns the release id, and false when the index does not hold it.
func (ix *Index) Get(ctx context.Context, id string) (usenet.Release, bool, error) {
	var data []byte
	err := ix.db.QueryRowContext(ctx, `SELECT data FROM rel WHERE id = ?`, id).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return usenet.Release{}, false, nil
	}
	if err != nil {
		return usenet.Release{}, false, fmt.Errorf("search: get %s: %w", id, err)
	}
	var r usenet.Release
	if err := json.Unmarshal(data, &r); err != nil {
		return usenet.Release{}, false, fmt.Errorf("search: decode %s: %w", id, err)
	}
	return r, true, nil
}

// matchExpr is the FTS5 expression of q's conditions, "" for none, with
// words the distinct words of q.Words (see Query.words) and each category
// once. User text only ever appears as double-quoted strings of letters
// and digits, so nothing a user types is FTS syntax.
func matchExpr(q Query, words []string) string {
	var and []string
	for _, w := range words {
		and = append(and, "name:"+quote(w))
	}
	if len(q.Cats) > 0 {
		var or []string
		for i, c := range q.Cats {
			if slices.Contains(q.Cats[:i], c) {
				continue
			}
			or = append(or, "tags:"+quote(catTag(c)))
		}
		and = append(and, "("+strings.Join(or, " OR ")+")")
	}
	if q.Group != "" {
		and = append(and, "tags:"+quote(groupTag(q.Group)))
	}
	season := q.Season > 0 || q.HasSeason
	switch {
	case season && q.Episode > 0:
		and = append(and, "tags:"+quote(seasonEpisodeTag(q.Season, q.Episode)))
	case season:
		and = append(and, "tags:"+quote(seasonTag(q.Season)))
	case q.Episode > 0:
		and = append(and, "tags:"+quote(episodeTag(q.Episode)))
	}
	if !q.Aired.IsZero() {
		// A phrase of three name tokens: the tokenizer splits
		// 2026.12.02 into 2026, 12 and 02 at consecutive positions, so
		// the date needs no tags of its own (and no reindexing).
		y, m, d := q.Aired.Date()
		and = append(and, "name:"+quote(fmt.Sprintf("%04d %02d %02d", y, m, d)))
	}
	return strings.Join(and, " AND ")
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
