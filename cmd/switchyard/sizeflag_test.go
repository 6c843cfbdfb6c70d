package main

import "testing"

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "4096": 4096, "512KiB": 512 << 10, "256MiB": 256 << 20, "2GiB": 2 << 30, "3mb": 3 << 20, "10B": 10, " 1 GiB ": 1 << 30} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "1.5GiB", "12XB", "9223372036854775807KiB"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
	n := int64(256 << 20)
	if s := (sizeValue{&n}).String(); s != "256MiB" {
		t.Errorf("String() = %q, want 256MiB", s)
	}
}
