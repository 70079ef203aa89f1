package main

import (
	"testing"
	"time"

	"github.com/modelship/modelship/test/framework/fleet"
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

// TestTheJudgeMatrixRunsDistinctScenarios: two runs of a workload never see the same requests,
// the bursty variant sends each 20-second bin's requests at once, and the candidates parse.
func TestTheJudgeMatrixRunsDistinctScenarios(t *testing.T) {
	tr, err := fleet.LoadTrace("../../traces/azure-llm-2023-conv.csv")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := parseJudgeWorkloads("trace@6,bursty@4", tr)
	if err != nil || len(ws) != 2 {
		t.Fatalf("workloads %v, %v", ws, err)
	}
	a, _ := ws[0].arrivals(2, 1, 200)
	b, _ := ws[0].arrivals(3, 2, 200)
	if len(a) == 0 || len(b) == 0 || a[0] == b[0] && a[1] == b[1] && a[2] == b[2] {
		t.Fatalf("runs 1 and 2 start alike: %v / %v", a[:3], b[:3])
	}
	bursty, _ := ws[1].arrivals(2, 1, 200)
	instants := map[time.Duration]bool{}
	for _, x := range bursty[:200] {
		instants[x.At] = true
	}
	if len(instants) > 20 {
		t.Errorf("the bursty variant's first 200 requests arrive at %d instants, want a handful of bursts", len(instants))
	}
	cs, err := parseJudgeCandidates("1.25,1.5,3")
	if err != nil || len(cs) != 4 || cs[0].mult != 1 || cs[2].name != "1.5x" {
		t.Errorf("candidates %v, %v", cs, err)
	}
	if _, err := parseJudgeCandidates("0.9"); err == nil {
		t.Error("a faster candidate was accepted as a regression")
	}
}
