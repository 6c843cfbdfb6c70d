package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeValue is a flag holding a byte count, written as a number of bytes
// or with a binary unit: 512KiB, 256MiB, 2GiB (KB, MB and GB are the same
// binary units; B is bytes).
type sizeValue struct{ n *int64 }

var sizeUnits = []struct {
	suffix string
	shift  uint
}{
	{"KIB", 10}, {"MIB", 20}, {"GIB", 30}, {"KB", 10}, {"MB", 20}, {"GB", 30}, {"K", 10}, {"M", 20}, {"G", 30}, {"B", 0},
}

// parseSize reads a size as sizeValue documents it; it must not be
// negative.
func parseSize(s string) (int64, error) {
	num, shift := strings.TrimSpace(s), uint(0)
	up := strings.ToUpper(num)
	for _, u := range sizeUnits {
		if strings.HasSuffix(up, u.suffix) {
			num, shift = strings.TrimSpace(num[:len(num)-len(u.suffix)]), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size: want bytes as a whole number, optionally with KiB, MiB or GiB", s)
	}
	if n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n << shift, nil
}

func (v sizeValue) String() string {
	if v.n == nil {
		return "0"
	}
	n := *v.n
	for _, u := range []struct {
		name  string
		shift uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

func (v sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v.n = n
	return nil
}

func (sizeValue) Type() string { return "SIZE" }
