package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// lazyStmt is a statement of one stream's connection, prepared on first
// use and kept until the stream closes. A stream is opened for a few
// requests as often as for many (the open-stream cache evicts and reopens),
// and most requests need two or three of its statements: preparing them
// all at every open was a large part of its cost.
//
// It is the driver's own statement (database/sql/driver), reached and run
// through sql.Conn.Raw, not a *sql.Stmt: a keyed set runs five statements,
// and database/sql's work around each (the connection's locks taken per
// call, every argument converted through reflection, a Rows and a Row per
// query) was a measurable part of the store's CPU per set (see
// docs/benchmarks.md). The arguments are converted as database/sql's
// default converter does, and a row is scanned into the few destination
// types the store reads (scanValue); the driver's errors come back as they
// are, so classifyDisk and the busy timeout see what they saw before. A
// lazyStmt is used by one goroutine at a time, as its stream is.
type lazyStmt struct {
	query string
	st    driver.Stmt
	args  []driver.NamedValue // reused argument buffer
	dest  []driver.Value      // reused row buffer of query
	row   stmtRow             // the row of the last queryRow
	// sid is set on a pack's statements (pack.go): query is rewritten for
	// the pack's tables (packSQL) when prepared, and the id of the stream
	// using the statement is bound first, as ?1.
	sid     *int64
	bindSID bool // the prepared pack form binds the stream's id
}

// prepared returns the statement on dc, the driver connection of the
// stream's sql.Conn, preparing it first if needed.
func (l *lazyStmt) prepared(dc any) (driver.Stmt, error) {
	if l.st != nil {
		return l.st, nil
	}
	pc, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		return nil, fmt.Errorf("prepare: driver connection %T has no PrepareContext", dc)
	}
	q := l.query
	if l.sid != nil {
		q, l.bindSID = packSQL(q)
	}
	st, err := pc.PrepareContext(context.Background(), q)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	l.st = st
	return st, nil
}

// bind converts args into the statement's argument buffer as database/sql
// would: the driver's own value types as they are, integers as int64 (a
// uint64 with the high bit set refused, as database/sql refuses it), and
// anything else through driver.DefaultParameterConverter.
func (l *lazyStmt) bind(args []any) ([]driver.NamedValue, error) {
	nv := l.args[:0]
	first := 1
	if l.bindSID {
		nv = append(nv, driver.NamedValue{Ordinal: 1, Value: *l.sid})
		first = 2
	}
	for i, a := range args {
		var v driver.Value
		switch x := a.(type) {
		case nil, int64, string, []byte, bool, float64, time.Time:
			v = x
		case uint64:
			if x > math.MaxInt64 {
				return nil, fmt.Errorf("argument %d: uint64 values with high bit set are not supported", i+1)
			}
			v = int64(x)
		case int:
			v = int64(x)
		default:
			var err error
			if v, err = driver.DefaultParameterConverter.ConvertValue(a); err != nil {
				return nil, fmt.Errorf("argument %d: %w", i+1, err)
			}
		}
		nv = append(nv, driver.NamedValue{Ordinal: i + first, Value: v})
	}
	l.args = nv
	return nv, nil
}

// exec runs the statement as sql.Stmt.Exec does.
func (l *lazyStmt) exec(c *sql.Conn, args ...any) (sql.Result, error) {
	var res driver.Result
	err := c.Raw(func(dc any) error {
		st, err := l.prepared(dc)
		if err != nil {
			return err
		}
		nv, err := l.bind(args)
		if err != nil {
			return err
		}
		defer clear(nv) // drop references to the values
		se, ok := st.(driver.StmtExecContext)
		if !ok {
			return fmt.Errorf("exec: driver statement %T has no ExecContext", st)
		}
		res, err = se.ExecContext(context.Background(), nv)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// rows runs the statement and calls fn with each row's values, which are
// valid only during the call. fn runs while the connection is held: it must
// not use c.
func (l *lazyStmt) rows(c *sql.Conn, fn func(vals []driver.Value) error, args ...any) error {
	return c.Raw(func(dc any) error {
		st, err := l.prepared(dc)
		if err != nil {
			return err
		}
		nv, err := l.bind(args)
		if err != nil {
			return err
		}
		defer clear(nv)
		sq, ok := st.(driver.StmtQueryContext)
		if !ok {
			return fmt.Errorf("query: driver statement %T has no QueryContext", st)
		}
		rows, err := sq.QueryContext(context.Background(), nv)
		if err != nil {
			return err
		}
		n := len(rows.Columns())
		if cap(l.dest) < n {
			l.dest = make([]driver.Value, n)
		}
		vals := l.dest[:n]
		defer clear(vals)
		for {
			if err = rows.Next(vals); err != nil {
				break
			}
			if err = fn(vals); err != nil {
				break
			}
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
		// As database/sql's Rows: the close (which resets the statement)
		// can fail too, and its error counts when the rows did not.
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// queryRow runs the statement as sql.Stmt.QueryRow does: its first row (or
// sql.ErrNoRows) is read by the returned Scan, valid until the statement's
// next use.
func (l *lazyStmt) queryRow(c *sql.Conn, args ...any) rowScanner {
	r := &l.row
	clear(r.vals)
	r.vals, r.ok = r.vals[:0], false
	r.err = l.rows(c, func(vals []driver.Value) error {
		if !r.ok {
			r.vals, r.ok = append(r.vals, vals...), true
		}
		return errStopRows
	}, args...)
	if errors.Is(r.err, errStopRows) {
		r.err = nil
	}
	return r
}

// errStopRows ends a queryRow's loop after its first row.
var errStopRows = errors.New("stop rows")

// close closes the statement if it was prepared; c is the connection it was
// prepared on.
func (l *lazyStmt) close(c *sql.Conn) error {
	if l.st == nil {
		return nil
	}
	st := l.st
	l.st, l.bindSID = nil, false
	clear(l.row.vals)
	return c.Raw(func(any) error { return st.Close() })
}

// rowScanner is what sql.Row offers: a failed prepare or query reads as a
// failed Scan, as with database/sql.
type rowScanner interface {
	Scan(dest ...any) error
}

// stmtRow is the first row of a lazyStmt's queryRow.
type stmtRow struct {
	vals []driver.Value
	ok   bool // there was a row
	err  error
}

// Scan implements rowScanner as sql.Row.Scan does.
func (r *stmtRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	if !r.ok {
		return sql.ErrNoRows
	}
	if len(dest) != len(r.vals) {
		return fmt.Errorf("sql: expected %d destination arguments in Scan, not %d", len(r.vals), len(dest))
	}
	for i, d := range dest {
		if err := scanValue(d, r.vals[i]); err != nil {
			return fmt.Errorf("sql: Scan error on column index %d: %w", i, err)
		}
	}
	return nil
}

// scanValue stores the driver value v in dest, for the destination types
// the store scans into, with database/sql's rules for them: NULL only into
// a sql.Scanner (or *[]byte, *any), bool from 0 or 1, no negative into an
// unsigned integer. The driver hands out fresh []byte copies, so a blob is
// kept without another copy.
func scanValue(dest any, v driver.Value) error {
	switch d := dest.(type) {
	case *int64:
		if x, ok := v.(int64); ok {
			*d = x
			return nil
		}
	case *uint64:
		if x, ok := v.(int64); ok {
			if x < 0 {
				return fmt.Errorf("converting driver.Value type int64 (%d) to a uint64: value out of range", x)
			}
			*d = uint64(x)
			return nil
		}
	case *int:
		if x, ok := v.(int64); ok && x >= math.MinInt && x <= math.MaxInt {
			*d = int(x)
			return nil
		}
	case *bool:
		if x, ok := v.(int64); ok && (x == 0 || x == 1) {
			*d = x == 1
			return nil
		}
	case *string:
		switch x := v.(type) {
		case string:
			*d = x
			return nil
		case []byte:
			*d = string(x)
			return nil
		case int64:
			*d = strconv.FormatInt(x, 10)
			return nil
		}
	case *[]byte:
		switch x := v.(type) {
		case nil:
			*d = nil
			return nil
		case []byte:
			*d = x
			return nil
		case string:
			*d = []byte(x)
			return nil
		}
	case *any:
		*d = v
		return nil
	case sql.Scanner:
		return d.Scan(v)
	}
	return fmt.Errorf("unsupported scan of driver.Value type %T into type %T", v, dest)
}
