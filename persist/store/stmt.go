package store

import (
	"context"
	"database/sql"
	"fmt"
)

// lazyStmt is a statement of one stream's connection, prepared on first
// use and kept until the stream closes. A stream is opened for a few
// requests as often as for many (the open-stream cache evicts and reopens),
// and most requests need two or three of its statements: preparing them
// all at every open was a large part of its cost.
type lazyStmt struct {
	query string
	st    *sql.Stmt
}

// stmt returns the prepared statement, preparing it on c first if needed.
func (l *lazyStmt) stmt(c *sql.Conn) (*sql.Stmt, error) {
	if l.st == nil {
		st, err := c.PrepareContext(context.Background(), l.query)
		if err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
		l.st = st
	}
	return l.st, nil
}

// rowScanner is what sql.Row offers, so that a failed prepare reads as a
// failed query.
type rowScanner interface {
	Scan(dest ...any) error
}

// errRow is a row whose Scan fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// queryRow runs the statement as sql.Stmt.QueryRow does.
func (l *lazyStmt) queryRow(c *sql.Conn, args ...any) rowScanner {
	st, err := l.stmt(c)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRow(args...)
}

// exec runs the statement as sql.Stmt.Exec does.
func (l *lazyStmt) exec(c *sql.Conn, args ...any) (sql.Result, error) {
	st, err := l.stmt(c)
	if err != nil {
		return nil, err
	}
	return st.Exec(args...)
}

// close closes the statement if it was prepared.
func (l *lazyStmt) close() error {
	if l.st == nil {
		return nil
	}
	err := l.st.Close()
	l.st = nil
	return err
}
