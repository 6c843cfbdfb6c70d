package store

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// TestLazyStmtAsDatabaseSQL holds the statements run on the driver's own API
// (stmt.go) to what database/sql did with the same calls: argument
// conversion, scans into each destination type the store uses, NULLs, no
// row, a refused uint64, a failed prepare, and statements closed with the
// stream.
func TestLazyStmtAsDatabaseSQL(t *testing.T) {
	t.Parallel()
	st, err := NewMemory().Open("hub", "stmt", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := st.(*sqliteStream)

	ins := lazyStmt{query: `INSERT INTO meta(k, v) VALUES(?, ?)`}
	for _, a := range []struct {
		k string
		v any
	}{
		{"u64", uint64(7)}, {"int", 3}, {"neg", int64(-2)}, {"str", "text"}, {"blob", []byte{1, 2}},
		{"empty", []byte{}}, {"nilblob", []byte(nil)}, {"null", nil}, {"true", true}, {"i32", int32(5)},
	} {
		if _, err := ins.exec(s.conn, a.k, a.v); err != nil {
			t.Fatalf("insert %s: %v", a.k, err)
		}
	}
	if _, err := ins.exec(s.conn, "big", uint64(math.MaxInt64)+1); err == nil || !strings.Contains(err.Error(), "high bit") {
		t.Fatalf("uint64 with the high bit set: err %v, want refused", err)
	}

	get := lazyStmt{query: `SELECT v, typeof(v) FROM meta WHERE k = ?`}
	var typ string
	var u uint64
	if err := get.queryRow(s.conn, "u64").Scan(&u, &typ); err != nil || u != 7 || typ != "integer" {
		t.Fatalf("u64: %d %s %v", u, typ, err)
	}
	var n int
	if err := get.queryRow(s.conn, "int").Scan(&n, &typ); err != nil || n != 3 {
		t.Fatalf("int: %d %v", n, err)
	}
	if err := get.queryRow(s.conn, "neg").Scan(&u, &typ); err == nil {
		t.Fatal("negative into uint64: no error")
	}
	var i64 int64
	if err := get.queryRow(s.conn, "i32").Scan(&i64, &typ); err != nil || i64 != 5 {
		t.Fatalf("int32: %d %v", i64, err)
	}
	var str string
	if err := get.queryRow(s.conn, "str").Scan(&str, &typ); err != nil || str != "text" || typ != "text" {
		t.Fatalf("str: %q %s %v", str, typ, err)
	}
	var b []byte
	if err := get.queryRow(s.conn, "blob").Scan(&b, &typ); err != nil || string(b) != "\x01\x02" || typ != "blob" {
		t.Fatalf("blob: %v %s %v", b, typ, err)
	}
	// An empty blob is a blob, not NULL; a nil one is NULL, as database/sql binds them.
	if err := get.queryRow(s.conn, "empty").Scan(&b, &typ); err != nil || len(b) != 0 || typ != "blob" {
		t.Fatalf("empty blob: %v %s %v", b, typ, err)
	}
	if err := get.queryRow(s.conn, "nilblob").Scan(&b, &typ); err != nil || b != nil || typ != "null" {
		t.Fatalf("nil blob: %v %s %v", b, typ, err)
	}
	var ns sql.NullString
	if err := get.queryRow(s.conn, "null").Scan(&ns, &typ); err != nil || ns.Valid {
		t.Fatalf("null into NullString: %v %v", ns, err)
	}
	if err := get.queryRow(s.conn, "null").Scan(&i64, &typ); err == nil {
		t.Fatal("NULL into int64: no error")
	}
	var ok bool
	if err := get.queryRow(s.conn, "true").Scan(&ok, &typ); err != nil || !ok {
		t.Fatalf("bool: %v %v", ok, err)
	}
	if err := get.queryRow(s.conn, "u64").Scan(&ok, &typ); err == nil {
		t.Fatal("7 into bool: no error")
	}
	if err := get.queryRow(s.conn, "missing").Scan(&str, &typ); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("no row: %v, want sql.ErrNoRows", err)
	}
	if err := get.queryRow(s.conn, "str").Scan(&str); err == nil {
		t.Fatal("too few destinations: no error")
	}

	var keys []string
	all := lazyStmt{query: `SELECT k FROM meta WHERE k IN (?, ?, ?) ORDER BY k`}
	if err := all.rows(s.conn, func(vals []driver.Value) error {
		var k string
		if err := scanValue(&k, vals[0]); err != nil {
			return err
		}
		keys = append(keys, k)
		return nil
	}, "str", "int", "none"); err != nil || strings.Join(keys, ",") != "int,str" {
		t.Fatalf("rows: %v %v", keys, err)
	}

	bad := lazyStmt{query: `SELECT nosuchcolumn FROM meta`}
	if err := bad.queryRow(s.conn).Scan(&str); err == nil || !strings.Contains(err.Error(), "prepare") {
		t.Fatalf("bad query: %v, want a prepare error", err)
	}
	if bad.st != nil {
		t.Fatal("a failed prepare kept a statement")
	}

	// The stream's own statements are prepared on use and closed with it.
	if _, _, err := s.Write([]WriteOp{{Key: "a", Value: []byte("1")}, {Key: "a", Value: []byte("2")}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if s.beginStmt.st == nil || s.commitStmt.st == nil {
		t.Fatal("a write left begin/commit unprepared")
	}
	for _, l := range []*lazyStmt{&ins, &get, &all, &bad} {
		if err := l.close(s.conn); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, l := range s.all() {
		if l.st != nil {
			t.Fatalf("statement %q still open after Close", l.query)
		}
	}
}
