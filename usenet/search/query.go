package search

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/usenet"
)

// DefaultLimit is the page size of a Query with Limit 0.
const DefaultLimit = 100

// Query selects releases; its conditions all hold for each result.
type Query struct {
	// Words must all occur in the release name, in any order, ignoring
	// case and diacritics. Words are split on everything but letters and
	// digits, as names are (Some.Show_S01-E02 is the words some show s01
	// e02). They are plain words: quotes, *, -, :, AND, NEAR( have no
	// search meaning. Empty matches every release.
	Words string
	// Cats keeps releases in any of these categories; a parent (5000)
	// matches its subcategories (5040). Empty means any.
	Cats []int
	// Group keeps releases posted to this group (case-insensitive).
	Group string
	// MaxAge keeps releases posted at most this long ago. Zero means any.
	MaxAge time.Duration
	// Season and Episode keep releases whose name has S01E02 (or S01.E02,
	// 1x02) with these numbers; a Season alone also matches a season pack
	// (S01). Zero means any.
	Season, Episode int
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

// Search runs q.
func (ix *Index) Search(ctx context.Context, q Query) (Result, error) {
	if q.Limit < 0 || q.Offset < 0 {
		return Result{}, fmt.Errorf("search: negative limit %d or offset %d", q.Limit, q.Offset)
	}
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	match := matchExpr(q)
	var minKey int64
	if q.MaxAge > 0 {
		minKey = dateBase(ix.now().Add(-q.MaxAge).Unix())
	}
	// One read transaction, so the total and the page agree.
	tx, err := ix.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Result{}, fmt.Errorf("search: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var res Result
	var rows *sql.Rows
	switch {
	case match == "":
		if minKey == 0 {
			n, _, err := getMeta(ctx, tx, metaCount)
			if err != nil {
				return Result{}, fmt.Errorf("search: %w", err)
			}
			res.Total = int(n)
		} else if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM rel WHERE rk >= ?`, minKey).Scan(&res.Total); err != nil {
			return Result{}, fmt.Errorf("search: count: %w", err)
		}
		rows, err = tx.QueryContext(ctx, `SELECT data FROM rel WHERE rk >= ? ORDER BY rk DESC LIMIT ? OFFSET ?`, minKey, q.Limit, q.Offset)
	default:
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM fts WHERE fts MATCH ? AND rowid >= ?`, match, minKey).Scan(&res.Total); err != nil {
			return Result{}, fmt.Errorf("search %q: count: %w", match, err)
		}
		// FTS5 walks its doclists in rowid order, so this reads only the
		// page, not every match.
		rows, err = tx.QueryContext(ctx, `SELECT data FROM rel WHERE rk IN (
			SELECT rowid FROM fts WHERE fts MATCH ? AND rowid >= ? ORDER BY rowid DESC LIMIT ? OFFSET ?
		) ORDER BY rk DESC`, match, minKey, q.Limit, q.Offset)
	}
	if err != nil {
		return Result{}, fmt.Errorf("search: %w", err)
	}
	res.Releases, err = scanReleases(rows)
	if err != nil {
		return Result{}, fmt.Errorf("search: %w", err)
	}
	return res, nil
}

func scanReleases(rows *sql.Rows) ([]usenet.Release, error) {
	defer rows.Close()
	var out []usenet.Release
	for rows.Next() {
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

// matchExpr is the FTS5 expression of q's conditions, "" for none. User
// text only ever appears as double-quoted strings of letters and digits,
// so nothing a user types is FTS syntax.
func matchExpr(q Query) string {
	var and []string
	for _, w := range usenet.Words(q.Words) {
		and = append(and, "name:"+quote(w))
	}
	if len(q.Cats) > 0 {
		var or []string
		for _, c := range q.Cats {
			or = append(or, "tags:"+quote(catTag(c)))
		}
		and = append(and, "("+strings.Join(or, " OR ")+")")
	}
	if q.Group != "" {
		and = append(and, "tags:"+quote(groupTag(q.Group)))
	}
	switch {
	case q.Season > 0 && q.Episode > 0:
		and = append(and, "tags:"+quote(seasonEpisodeTag(q.Season, q.Episode)))
	case q.Season > 0:
		and = append(and, "tags:"+quote(seasonTag(q.Season)))
	case q.Episode > 0:
		and = append(and, "tags:"+quote(episodeTag(q.Episode)))
	}
	return strings.Join(and, " AND ")
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
