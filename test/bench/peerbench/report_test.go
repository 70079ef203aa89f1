package peerbench

import (
	"encoding/csv"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

func families(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	f, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The simulator's counters restart with it and vanish with their pods; the totals only grow,
// and only the namespace's series count.
func TestAccumulatorTotalsSurviveRestartsAndPodDeletions(t *testing.T) {
	var a accumulator
	images := map[string]string{"llm-a": "v1", "llm-b": "v2"}
	scrapes := []string{
		`vllm:request_success_total{namespace="ns",pod="llm-a",model_name="m",finished_reason="stop"} 10
vllm:request_success_total{namespace="other",pod="x",model_name="m",finished_reason="stop"} 99
fleetsim_gateway_responses_total{namespace="ns",modelserver="llm",color="blue",code="200"} 10
fleetsim_gateway_responses_total{namespace="ns",modelserver="llm",color="blue",code="503"} 2
`,
		// llm-b appears, llm-a grows.
		`vllm:request_success_total{namespace="ns",pod="llm-a",model_name="m",finished_reason="stop"} 15
vllm:request_success_total{namespace="ns",pod="llm-b",model_name="m",finished_reason="stop"} 4
fleetsim_gateway_responses_total{namespace="ns",modelserver="llm",color="blue",code="200"} 19
fleetsim_gateway_responses_total{namespace="ns",modelserver="llm",color="blue",code="503"} 2
`,
		// The simulator restarted: everything went back; llm-a is gone.
		`vllm:request_success_total{namespace="ns",pod="llm-b",model_name="m",finished_reason="stop"} 3
fleetsim_gateway_responses_total{namespace="ns",modelserver="llm",color="blue",code="200"} 3
`,
	}
	for _, s := range scrapes {
		a.add("ns", families(t, s), images)
	}
	if a.served["v1"] != 15 || a.served["v2"] != 7 {
		t.Errorf("served %v, want v1 15 (10+5) and v2 7 (4, then 3 after the restart)", a.served)
	}
	if a.responses["200"] != 22 || a.responses["503"] != 2 {
		t.Errorf("responses %v, want 200: 22 (19 + 3 after the restart), 503: 2", a.responses)
	}
}

func TestAccumulatorSumsHistogramsAcrossPods(t *testing.T) {
	var a accumulator
	a.add("ns", families(t, `# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{namespace="ns",pod="a",model_name="m",le="0.5"} 8
vllm:time_to_first_token_seconds_bucket{namespace="ns",pod="a",model_name="m",le="1"} 10
vllm:time_to_first_token_seconds_bucket{namespace="ns",pod="a",model_name="m",le="+Inf"} 10
vllm:time_to_first_token_seconds_sum{namespace="ns",pod="a",model_name="m"} 4
vllm:time_to_first_token_seconds_count{namespace="ns",pod="a",model_name="m"} 10
vllm:time_to_first_token_seconds_bucket{namespace="ns",pod="b",model_name="m",le="0.5"} 0
vllm:time_to_first_token_seconds_bucket{namespace="ns",pod="b",model_name="m",le="1"} 0
vllm:time_to_first_token_seconds_bucket{namespace="ns",pod="b",model_name="m",le="+Inf"} 10
vllm:time_to_first_token_seconds_sum{namespace="ns",pod="b",model_name="m"} 40
vllm:time_to_first_token_seconds_count{namespace="ns",pod="b",model_name="m"} 10
`), nil)
	h := a.histogram("vllm:time_to_first_token_seconds")
	want := metrics.Histogram{{UpperBound: 0.5, Count: 8}, {UpperBound: 1, Count: 10}, {UpperBound: math.Inf(1), Count: 20}}
	if len(h) != len(want) {
		t.Fatalf("histogram %v, want %v", h, want)
	}
	for i := range want {
		if h[i] != want[i] {
			t.Errorf("bucket %d: %v, want %v", i, h[i], want[i])
		}
	}
}

func point(start time.Time, s int, desired int32, gpus int, served map[string]float64, responses map[string]float64) Point {
	return Point{At: start.Add(time.Duration(s) * time.Second), Desired: desired, GPUs: gpus, Served: served, Responses: responses}
}

func TestScaleFigures(t *testing.T) {
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	r := &Run{Start: start, Events: map[string]time.Time{
		"step":         start.Add(20 * time.Second),
		"outage-start": start.Add(60 * time.Second),
		"outage-end":   start.Add(80 * time.Second),
	}}
	// Desired: 2 until 30s, 3 from 30s, 4 from 50s; during the outage it drops to 2 at 70s and
	// comes back to 4 at 90s.
	desired := map[int]int32{0: 2, 10: 2, 20: 2, 30: 3, 40: 3, 50: 4, 60: 4, 70: 2, 80: 2, 90: 4, 100: 4, 110: 4, 120: 4}
	for s := 0; s <= 120; s += 10 {
		r.Points = append(r.Points, point(start, s, desired[s], int(desired[s]), nil, map[string]float64{"503": float64(s / 100)}))
	}
	f := Scale(r, SLO{TTFT: time.Second, ITL: time.Second})
	if f.StepToReplica != 10*time.Second {
		t.Errorf("step to first replica %s, want 10s (asked 3 at 30s, step at 20s)", f.StepToReplica)
	}
	if f.BeforeOutage != 4 || f.OutageMin != 2 || f.OutageMax != 4 {
		t.Errorf("outage replicas before %d min %d max %d, want 4, 2, 4", f.BeforeOutage, f.OutageMin, f.OutageMax)
	}
	if f.ScaleEvents != 4 {
		t.Errorf("scale events %d, want 4 (2->3, 3->4, 4->2, 2->4)", f.ScaleEvents)
	}
	// GPUs: 2,2,2,3,3,4,4,2,2,4,4,4 for 10s each = 36 GPU x 10s.
	if want := 360.0 / 3600; math.Abs(f.GPUHours-want) > 1e-9 {
		t.Errorf("GPU-hours %v, want %v", f.GPUHours, want)
	}
	// 12 windows; the one from 90s to 100s holds the 503 answered at 100s and misses.
	if f.Minutes != 2 || math.Abs(f.SLOMinutes-11.0/6) > 1e-9 {
		t.Errorf("SLO minutes %v of %v, want 11/6 of 2", f.SLOMinutes, f.Minutes)
	}
}

func TestRolloutFiguresCountTheImagesRequestsOverTheRollout(t *testing.T) {
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	r := &Run{Start: start, Verdicts: map[string]string{"bad": RolledBack}, Events: map[string]time.Time{
		"bad": start.Add(10 * time.Second), "bad-verdict": start.Add(40 * time.Second), "bad-end": start.Add(60 * time.Second),
	}}
	for s, served := range []map[string]float64{
		{"v1": 100}, {"v1": 150, "slow": 5}, {"v1": 200, "slow": 20}, {"v1": 250, "slow": 30}, {"v1": 300, "slow": 30}, {"v1": 350, "slow": 30}, {"v1": 400, "slow": 30}, {"v1": 450, "slow": 30},
	} {
		r.Points = append(r.Points, point(start, 10*s, 4, 4, served, nil))
	}
	f := Rollout(r, "bad", "slow")
	if f.Verdict != RolledBack || f.Decided != 30*time.Second {
		t.Errorf("verdict %q after %s, want rolled-back after 30s", f.Verdict, f.Decided)
	}
	if f.ImageRequests != 25 || f.ServedTotal != 275 {
		t.Errorf("bad requests %v of %v, want 25 of 275 (from the point at 10s to the one at 60s)", f.ImageRequests, f.ServedTotal)
	}
}

// A bench of rollouts only (no autoscaling run) still plots: its empty log-scale panels are
// left out rather than drawn without values.
func TestPlotDrawsOnlyTheScenariosThatRan(t *testing.T) {
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	r := &Run{Contender: "flagger", Start: start, Events: map[string]time.Time{"good": start.Add(10 * time.Second)}}
	for s := 0; s <= 60; s += 2 {
		r.Points = append(r.Points, Point{At: start.Add(time.Duration(s) * time.Second), Weight: int32(s / 10 * 10),
			TTFT: metrics.Histogram{{UpperBound: 0.5, Count: float64(s)}, {UpperBound: 1, Count: float64(2 * s)}, {UpperBound: math.Inf(1), Count: float64(2 * s)}}})
	}
	path := t.TempDir() + "/peers.png"
	if err := Plot(path, nil, map[string]*Run{"flagger": r}, SLO{TTFT: 2 * time.Second, ITL: 100 * time.Millisecond}); err != nil {
		t.Fatalf("Plot: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 8 || string(b[1:4]) != "PNG" {
		t.Fatalf("no PNG written (%d bytes, %v)", len(b), err)
	}
	if err := Plot(path, nil, nil, SLO{}); err == nil {
		t.Error("Plot without runs did not fail")
	}
}

func TestSpreadGivesEachFiguresMedianAndRangeOverTheRounds(t *testing.T) {
	rounds := [][]string{
		{"modelship_bad_requests=119", "modelship_bad_verdict=rolled-back", "bad_requests_vs_flagger=0.583", "flagger_good_decided_s=65.4"},
		{"modelship_bad_requests=127", "modelship_bad_verdict=rolled-back", "bad_requests_vs_flagger=n/a", "flagger_good_decided_s=-1"},
		{"modelship_bad_requests=309", "modelship_bad_verdict=promoted", "bad_requests_vs_flagger=1.500", "flagger_good_decided_s=70.0"},
	}
	got := strings.Join(Spread(rounds), "\n")
	want := strings.Join([]string{
		"modelship_bad_requests_median=127", "modelship_bad_requests_min=119", "modelship_bad_requests_max=309",
		"modelship_bad_verdict_rounds=rolled-back,rolled-back,promoted",
		"bad_requests_vs_flagger_rounds=0.583,n/a,1.500",
		"flagger_good_decided_s_rounds=65.4,-1,70.0",
	}, "\n")
	if got != want {
		t.Errorf("Spread:\n%s\nwant:\n%s", got, want)
	}
	even := strings.Join(Spread([][]string{{"x_s=1.5", "n=3"}, {"x_s=2.25", "n=4"}}), " ")
	if even != "x_s_median=1.88 x_s_min=1.50 x_s_max=2.25 n_median=4 n_min=3 n_max=4" {
		t.Errorf("Spread of two rounds = %q: want the mean of the middle two, at the figures' precision", even)
	}
}

func TestTheCSVSaysWhichRoundARunBelongsTo(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	runs := []*Run{
		{Contender: "modelship", Scenario: "rollouts", Round: 1, Start: at, Points: []Point{{At: at}}},
		{Contender: "modelship", Scenario: "rollouts", Round: 2, Start: at, Points: []Point{{At: at, Why: "last: 3 -> 5: slo, a, b"}}},
	}
	path := dir + "/t.csv"
	if err := WriteCSV(path, runs); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := func(name string) int { return slices.Index(rows[0], name) }
	if len(rows) != 3 || col("round") < 0 || col("why") < 0 || rows[1][col("round")] != "1" || rows[2][col("round")] != "2" ||
		rows[1][col("why")] != "" || rows[2][col("why")] != "last: 3 -> 5: slo, a, b" {
		t.Errorf("CSV rows %q: want a round column, 1 then 2, and a why column with what the scaler said", rows)
	}
}

// What modelship's autoscaler said, for the timeline: the last change, each proposal and the
// capacities learnt.
func TestTheTimelineSaysWhatModelshipsAutoscalerSaid(t *testing.T) {
	got := scalerSaid(&v1alpha1.AutoscalingStatus{LastScaleReason: "5 -> 7: slo 3.4 (target 0.52)",
		Proposals:         []v1alpha1.Proposal{{Metric: "slo", Value: "3.4", Replicas: ptr.To(int32(7)), Message: "rising 0.01/s: 7 needed in 5s"}, {Metric: "gpuUtilization", Message: "no data"}},
		LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: "slo", PerReplica: "0.61", Floor: "0.5"}}})
	want := "last: 5 -> 7: slo 3.4 (target 0.52); slo=3.4 -> 7: rising 0.01/s: 7 needed in 5s; gpuUtilization= -> -: no data; learnt slo per_replica=0.61 floor=0.5 ceiling="
	if got != want {
		t.Errorf("scalerSaid = %q\nwant %q", got, want)
	}
}
