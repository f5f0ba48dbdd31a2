package tun

import (
	"strings"
	"testing"
)

func TestUniqueName(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		n := UniqueName("tw")
		if !strings.HasPrefix(n, "tw") || len(n) > 15 {
			t.Fatalf("UniqueName(%q) = %q: want the prefix and at most 15 bytes", "tw", n)
		}
		if seen[n] {
			t.Fatalf("UniqueName(%q) returned %q twice", "tw", n)
		}
		seen[n] = true
	}
	for _, prefix := range []string{"", "a-very-long-prefix-indeed"} {
		if n := UniqueName(prefix); len(n) > 15 || len(n) < 7 {
			t.Errorf("UniqueName(%q) = %q: want 7 to 15 bytes", prefix, n)
		}
	}
}
