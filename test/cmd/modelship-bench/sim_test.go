package main

import (
	"testing"
	"time"
)

// TestEveryAARunStartsAtItsOwnPointOfTheTrace: 200 A/A runs are 200 scenarios, not 50 run four
// times over.
func TestEveryAARunStartsAtItsOwnPointOfTheTrace(t *testing.T) {
	const aa = 200
	cycle := time.Hour
	seen := map[time.Duration]int{}
	for i := range aa {
		off := aaOffset(i, aa, cycle)
		if prev, dup := seen[off]; dup {
			t.Fatalf("runs %d and %d both start at %s", prev, i, off)
		}
		if off < 0 || off >= cycle {
			t.Fatalf("run %d starts at %s, outside one pass of %s", i, off, cycle)
		}
		seen[off] = i
	}
}
