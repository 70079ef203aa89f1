package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/test/framework/fleet"
	"github.com/modelship/modelship/test/sim/workloads"
	"k8s.io/utils/ptr"
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

// TestWorkloadFlagResolvesTheMatrix: --workload takes names or "matrix"; an unknown name is an
// error that lists the matrix; a --trace other than the shipped one joins at --rate-scale.
func TestWorkloadFlagResolvesTheMatrix(t *testing.T) {
	const shipped = "../../traces/azure-llm-2023-conv.csv"
	tr, err := fleet.LoadTrace(shipped)
	if err != nil {
		t.Fatal(err)
	}
	all, err := matrixWorkloads("matrix", shipped, tr, shipped, 1, 12)
	if err != nil || len(all) < 6 {
		t.Fatalf("matrix: %d workloads, %v; want at least 6", len(all), err)
	}
	two, err := matrixWorkloads("code-bursty, flash-crowd", shipped, tr, shipped, 1, 12)
	if err != nil || len(two) != 2 || two[0].Name != "code-bursty" || two[1].Name != "flash-crowd" {
		t.Fatalf("two names: %v, %v", two, err)
	}
	if _, err := matrixWorkloads("nope", shipped, tr, shipped, 1, 12); err == nil || !strings.Contains(err.Error(), "code-bursty") {
		t.Fatalf("unknown name: %v, want an error listing the matrix", err)
	}
	path := filepath.Join(t.TempDir(), "mine.csv")
	csv := "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-01 00:00:00.0000000,100,10\n2024-05-01 00:01:30.0000000,100,10\n2024-05-01 00:02:10.0000000,100,10\n"
	if err := os.WriteFile(path, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	mine, err := fleet.LoadTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := matrixWorkloads("code-bursty", shipped, mine, path, 1, 3)
	if err != nil || len(got) != 2 || got[1].Name != "trace:mine.csv" || got[1].RateScale != 3 {
		t.Fatalf("with --trace: %+v, %v; want code-bursty then trace:mine.csv at 3x", got, err)
	}
}

// TestTheJudgeMatrixRunsDistinctScenarios: two runs of a workload never see the same requests,
// the bursty variant sends each 20-second bin's requests at once, and the candidates parse.
func TestTheJudgeMatrixRunsDistinctScenarios(t *testing.T) {
	tr, err := fleet.LoadTrace("../../traces/azure-llm-2023-conv.csv")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := parseJudgeWorkloads("trace@6,bursty@4", tr, fleet.DefaultCapacity())
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

// TestTheJudgeMatrixStartsEachRunOfAMatrixWorkloadAtItsOwnPoint: a run of a matrix workload
// starts at its own point of the workload (a flash crowd 20 minutes in meets some runs'
// rollouts, not none), and two runs of a replay of the shipped trace see different requests,
// not the same requests at copies' other times.
func TestTheJudgeMatrixStartsEachRunOfAMatrixWorkloadAtItsOwnPoint(t *testing.T) {
	tr, err := fleet.LoadTrace("../../traces/azure-llm-2023-conv.csv")
	if err != nil {
		t.Fatal(err)
	}
	all, err := parseJudgeWorkloads("trace@6,matrix", tr, fleet.DefaultCapacity())
	if n := len(workloads.Matrix(tr)); err != nil || len(all) != 1+n || all[0].name != "trace@6" || all[1].name != "matrix:"+workloads.Matrix(tr)[0].Name {
		t.Fatalf("trace@6,matrix: %d workloads (%v), want trace@6 and the matrix's %d", len(all), err, n)
	}
	ws, err := parseJudgeWorkloads("matrix:flash-crowd,matrix:azure-conv", tr, fleet.DefaultCapacity())
	if err != nil || len(ws) != 2 {
		t.Fatalf("workloads %v, %v", ws, err)
	}
	perMinute := func(arr []fleet.Arrival) []int {
		n := make([]int, 30)
		for _, a := range arr {
			if m := int(a.At / time.Minute); m < len(n) {
				n[m]++
			}
		}
		return n
	}
	first, err := ws[0].arrivals(1, 0, 200)
	if err != nil {
		t.Fatal(err)
	}
	later, err := ws[0].arrivals(51, 50, 200) // a quarter of the hour in: the crowd 5 minutes into the run
	if err != nil {
		t.Fatal(err)
	}
	if f := perMinute(first); f[8] > 2*f[0] {
		t.Errorf("run 0 of flash-crowd: %d requests in minute 8 against %d in minute 0, want no crowd yet", f[8], f[0])
	}
	if l := perMinute(later); l[8] < 3*l[0] {
		t.Errorf("run 50 of 200 of flash-crowd: %d requests in minute 8 against %d in minute 0, want the crowd", l[8], l[0])
	}
	a, err := ws[1].arrivals(2, 1, 200)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ws[1].arrivals(101, 100, 200)
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for i := range 100 {
		if a[i].ContextTokens == b[i].ContextTokens && a[i].GeneratedTokens == b[i].GeneratedTokens {
			same++
		}
	}
	if same > 50 {
		t.Errorf("runs 1 and 100 of azure-conv: %d of their first 100 requests alike, want different requests", same)
	}
}

// TestTheJudgeMatrixSizesItsFleetAndRunsItsGPUs: a matrix workload of the judge runs on GPUs of
// its speed, over a stable fleet sized for its work (more pods for more load or slower GPUs,
// never fewer than rolloutReplicas), and matrix:NAME@REPLICAS and trace@SCALE@REPLICAS pin the
// fleet.
func TestTheJudgeMatrixSizesItsFleetAndRunsItsGPUs(t *testing.T) {
	tr, err := fleet.LoadTrace("../../traces/azure-llm-2023-conv.csv")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := parseJudgeWorkloads("matrix:azure-conv,matrix:azure-conv-x18-at40m,matrix:azure-conv-gpu0.7,matrix:azure-conv-x6-at20m,matrix:azure-conv-x18-at40m@8", tr, fleet.DefaultCapacity())
	if err != nil || len(ws) != 5 {
		t.Fatalf("workloads %v, %v", ws, err)
	}
	conv, x18, slow, x6, pinned := ws[0], ws[1], ws[2], ws[3], ws[4]
	if conv.replicas <= rolloutReplicas || x18.replicas <= conv.replicas || slow.replicas <= conv.replicas {
		t.Errorf("replicas: azure-conv %d, at 18x %d, on 0.7x GPUs %d; want more than %d, and more for more load or slower GPUs",
			conv.replicas, x18.replicas, slow.replicas, rolloutReplicas)
	}
	if x6.replicas != rolloutReplicas {
		t.Errorf("azure-conv at 6x: %d replicas, want the floor %d", x6.replicas, rolloutReplicas)
	}
	if slow.speed != 0.7 || conv.speed != 1 {
		t.Errorf("speeds %g and %g, want 0.7 and 1", slow.speed, conv.speed)
	}
	if pinned.replicas != 8 || pinned.name != "matrix:azure-conv-x18-at40m@8" {
		t.Errorf("pinned: %+v", pinned)
	}
	small, err := parseJudgeWorkloads("trace@1.5@2,bursty@1@1,trace@6", tr, fleet.DefaultCapacity())
	if err != nil || len(small) != 3 || small[0].replicas != 2 || small[1].replicas != 1 || small[2].replicas != rolloutReplicas || small[0].name != "trace@1.5@2" {
		t.Errorf("trace@SCALE@REPLICAS: %+v, %v; want 2 and 1 stable pods, then the default %d", small, err, rolloutReplicas)
	}
	for _, bad := range []string{"matrix:azure-conv@0", "matrix:azure-conv@x", "trace@1@0", "bursty@1@x", "trace@@2"} {
		if _, err := parseJudgeWorkloads(bad, tr, fleet.DefaultCapacity()); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// The --judge-* flags set the judge matrix's spec.rollout where given and leave the API's
// defaults where not.
func TestApplyJudgeRolloutSetsOnlyWhatIsGiven(t *testing.T) {
	saved := judgeRollout
	t.Cleanup(func() { judgeRollout = saved })
	r := v1alpha1.RolloutSpec{FailureLimit: 1}
	applyJudgeRollout(&r)
	if r.Analysis.ScrapeInterval != nil || r.StepDuration.Duration != 0 || r.LoadMatching != "" || r.FailureLimit != 1 {
		t.Fatalf("no flag given, yet %+v", r)
	}
	judgeRollout.scrape, judgeRollout.stepDuration, judgeRollout.failureLimit = time.Minute, 30*time.Second, ptr.To(int32(0))
	applyJudgeRollout(&r)
	if r.Analysis.ScrapeInterval == nil || r.Analysis.ScrapeInterval.Duration != time.Minute || r.StepDuration.Duration != 30*time.Second || r.FailureLimit != 0 {
		t.Errorf("--judge-scrape-interval 1m --judge-step-duration 30s --judge-failure-limit 0 gave %+v", r)
	}
}

// TestASlowerBuildOnOnePodIsJudgedWhereItCarriesAStablePodsLoad: on one stable pod the first
// step's weight stops at the next step's 25%, where the candidate pod carries a third of the
// stable pod's load and a 1.5x slower build reads about 1.23x stable on decode-per-token
// (above the 1.2x bound, never significantly): the step held it for the whole 40 minutes in
// one run of these four. A read at a lighter load clears nothing and holds nothing: the next
// step, at a stable pod's load, rolls back all four; the identical candidates are promoted.
func TestASlowerBuildOnOnePodIsJudgedWhereItCarriesAStablePodsLoad(t *testing.T) {
	tr, err := fleet.LoadTrace("../../traces/azure-llm-2023-conv.csv")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := parseJudgeWorkloads("bursty@0.5@1", tr, fleet.DefaultCapacity())
	if err != nil {
		t.Fatal(err)
	}
	cs, err := parseJudgeCandidates("1.5")
	if err != nil {
		t.Fatal(err)
	}
	const runs = 4
	cells, err := runJudgeMatrix(ws, cs, runs, judgeBase(fleet.DefaultCapacity(), 2*time.Second, 3*time.Minute), 1)
	if err != nil {
		t.Fatal(err)
	}
	if f := cells["bursty@0.5@1/1.5x"]; f == nil || f.rolledBack != runs {
		t.Errorf("1.5x slower on one stable pod: %+v, want all %d rolled back", f, runs)
	}
	if f := cells["bursty@0.5@1/aa"]; f == nil || f.promoted != runs {
		t.Errorf("identical on one stable pod: %+v, want all %d promoted", f, runs)
	}
}
