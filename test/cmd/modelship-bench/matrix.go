package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/test/framework/fleet"
	"github.com/modelship/modelship/test/sim/policysim"
	"github.com/modelship/modelship/test/sim/workloads"
	"k8s.io/utils/ptr"
)

// shippedTrace is the trace the repository ships (test/traces/README.md), relative to the
// repository's root where make runs the bench.
const shippedTrace = "test/traces/azure-llm-2023-conv.csv"

// simSettings are the sim subcommand's flags that every autoscaling run shares.
type simSettings struct {
	sloTTFT, sloITL, coldStart time.Duration
	minR, maxR                 int32
	seed                       uint64
	msTarget                   float64
	msWaiting                  int64
	msDown, sloDown, msUp      time.Duration
	msTol, gpuSpeed            float64
	only                       string
	decisions                  string // --out with --decisions, else ""
}

// writeDecisions points each modelship policy's Decisions at sim-decisions[-WORKLOAD]-POLICY.txt
// in the --decisions directory (nothing without it); the function returned closes the files.
func (s simSettings) writeDecisions(workload string, policies []policysim.Policy) (func() error, error) {
	var files []*os.File
	closeAll := func() error {
		var errs []error
		for _, f := range files {
			errs = append(errs, f.Close())
		}
		return errors.Join(errs...)
	}
	if s.decisions == "" {
		return closeAll, nil
	}
	if err := os.MkdirAll(s.decisions, 0o755); err != nil {
		return nil, err
	}
	for _, p := range policies {
		m, ok := p.(*policysim.Modelship)
		if !ok {
			continue
		}
		name := "sim-decisions-" + m.Label + ".txt"
		if workload != "" {
			name = "sim-decisions-" + workload + "-" + m.Label + ".txt"
		}
		f, err := os.Create(filepath.Join(s.decisions, name))
		if err != nil {
			return nil, errors.Join(err, closeAll())
		}
		files = append(files, f)
		m.Decisions = f
	}
	return closeAll, nil
}

// policies builds the run's configuration and its policies for arrivals arr over dur on GPUs at
// speed times --gpu-speed.
func (s simSettings) policies(arr []fleet.Arrival, dur time.Duration, speed float64) (policysim.Config, []policysim.Policy, error) {
	if len(arr) == 0 {
		return policysim.Config{}, nil, fmt.Errorf("no arrivals in %s", dur)
	}
	// The replicas run at --gpu-speed (times the workload's); modelship's work query assumes
	// the nominal rates, as a PromQL written for another GPU would.
	nominal := fleet.DefaultCapacity()
	capa := nominal.AtSpeed(s.gpuSpeed * speed)
	// Every policy starts from steady state: the replicas the first minutes' load needs.
	initial := min(s.maxR, max(s.minR, int32(math.Ceil(peakWork(arr, capa, 5)/oraclePerReplica))))
	cfg := policysim.Config{
		Arrivals: arr, Duration: dur, Capacity: capa, ColdStart: s.coldStart, Initial: initial,
		ScrapeInterval: 15 * time.Second, Step: 50 * time.Millisecond,
		SLOTTFT: s.sloTTFT, SLOITL: s.sloITL, Seed: s.seed,
	}
	lo, hi := s.minR, s.maxR
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	work := func(sig policysim.Signals) float64 {
		return nominal.Work(sig.PromptTPS, sig.GeneratedTPS)
	}
	learnt := policysim.RecipeSpec(lo, hi, s.coldStart, s.msTarget, s.msWaiting, s.msDown, s.msUp, s.msTol)
	learnt.Metrics[0].Prometheus.LearnCapacity = &v1alpha1.CapacityLearning{TargetPercentOfCapacity: learnPercent(s.msTarget),
		TimeToFirstTokenP95: &v1alpha1.Duration{Duration: s.sloTTFT}, InterTokenLatencyP95: &v1alpha1.Duration{Duration: s.sloITL}}
	policies := []policysim.Policy{
		&policysim.Modelship{Label: "modelship", Start: start, Work: work, Spec: policysim.RecipeSpec(lo, hi, s.coldStart, s.msTarget, s.msWaiting, s.msDown, s.msUp, s.msTol)},
		&policysim.Modelship{Label: "modelship-learnt", Start: start, Work: work, Spec: learnt},
		&policysim.Modelship{Label: "modelship-slo", Start: start, Spec: policysim.SLOSpec(lo, hi, s.sloTTFT, s.sloITL, s.coldStart, s.sloDown)},
		&policysim.Modelship{Label: "modelship-gpu70", Start: start, Spec: v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(lo)), MaxReplicas: hi}},
		&policysim.Modelship{Label: "modelship-saturation", Start: start, Spec: saturationSpec(lo, hi, s.msDown)},
		policysim.NewHPA("hpa-gpu70", lo, hi, 70, false, func(sig policysim.Signals) (float64, bool) { return sig.GPUUtilization, sig.HasGPU }),
		policysim.NewKEDA(lo, hi, 5),
		&policysim.PanicMax{Max: hi},
	}
	for _, p := range policies {
		if m, ok := p.(*policysim.Modelship); ok {
			m.BatchLimit = int32(capa.MaxBatch) // as stated by --max-num-seqs in the pod template
		}
	}
	if s.only != "" {
		keep := policies[:0]
		for _, p := range policies {
			if slices.Contains(strings.Split(s.only, ","), p.Name()) {
				keep = append(keep, p)
			}
		}
		policies = keep
	}
	return cfg, policies, nil
}

// runPolicies runs every policy on cfg, and the offline optimum within [lo, hi], in parallel.
func runPolicies(cfg policysim.Config, policies []policysim.Policy, lo, hi int32) ([]policysim.Result, policysim.OptimumResult) {
	results := make([]policysim.Result, len(policies))
	var opt policysim.OptimumResult
	var wg sync.WaitGroup
	wg.Go(func() { opt = policysim.Optimum(cfg, lo, hi) })
	for i, p := range policies {
		wg.Go(func() { results[i] = policysim.Run(cfg, p) })
	}
	wg.Wait()
	return results, opt
}

// printVersus prints each policy's figures against the optimum as key=value lines, under prefix.
func printVersus(prefix string, results []policysim.Result, opt policysim.OptimumResult) {
	infeasible := 0
	for _, x := range opt.Infeasible {
		if x {
			infeasible++
		}
	}
	fmt.Printf("%soptimum.slo_minutes=%.3f\n%soptimum.gpu_hours=%.3f\n%soptimum.infeasible_minutes=%d\n%soptimum.minutes_tried=%d\n",
		prefix, opt.SLOMinutes, prefix, opt.GPUHours, prefix, infeasible, prefix, opt.Tries)
	ms := policysim.Against(resultNamed(results, "modelship"), opt)
	fmt.Printf("%sgpu_hours_vs_optimum=%.3f\n%sslo_gap_vs_optimum=%.3f\n", prefix, ms.GPUHoursRatio, prefix, ms.SLOGap)
}

func resultNamed(results []policysim.Result, name string) policysim.Result {
	for _, r := range results {
		if r.Policy == name {
			return r
		}
	}
	return policysim.Result{}
}

// matrixWorkloads resolves --workload: "matrix" (or "all") is every workload of the matrix, else
// comma-separated names; the --trace file, when it is not the shipped trace, is added as a replay
// at --rate-scale.
func matrixWorkloads(names, base string, tr fleet.Trace, tracePath string, speed, rateScale float64) ([]workloads.Workload, error) {
	shipped := tr
	if filepath.Clean(base) != filepath.Clean(tracePath) {
		var err error
		if shipped, err = fleet.LoadTrace(base); err != nil {
			return nil, err
		}
	}
	matrix := workloads.Matrix(shipped)
	var out []workloads.Workload
	if names == "matrix" || names == "all" {
		out = matrix
	} else {
		for _, n := range strings.Split(names, ",") {
			w, err := workloads.Find(matrix, strings.TrimSpace(n))
			if err != nil {
				return nil, fmt.Errorf("--workload: %w", err)
			}
			out = append(out, w)
		}
	}
	if filepath.Clean(base) != filepath.Clean(tracePath) {
		if speed != 1 && speed != 0 {
			// Time-compress the given trace as the single-trace run does.
			rp, err := fleet.NewReplay(tr, fleet.ReplayOptions{Speed: speed})
			if err != nil {
				return nil, err
			}
			arr := rp.Until(rp.CycleDuration() + time.Nanosecond)
			tr = fleet.Trace{Start: tr.Start, Requests: make([]fleet.TraceRequest, len(arr))}
			for i, a := range arr {
				tr.Requests[i] = fleet.TraceRequest{Offset: a.At, ContextTokens: a.ContextTokens, GeneratedTokens: a.GeneratedTokens}
			}
		}
		out = append(out, workloads.FromTrace("trace:"+filepath.Base(tracePath), tr, rateScale))
	}
	return out, nil
}

// runMatrix runs the autoscaling policies on each workload and prints, per workload, its
// statistics, the policy table, and one summary line per policy.
func runMatrix(names, base string, tr fleet.Trace, tracePath string, speed, rateScale float64, set simSettings, out string) error {
	began := time.Now()
	ws, err := matrixWorkloads(names, base, tr, tracePath, speed, rateScale)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var summary []workloadResults
	type worstOf struct {
		value    float64
		workload string
	}
	worst := map[string][]worstOf{}
	var order []string
	for _, w := range ws {
		g, err := w.Trace(set.seed)
		if err != nil {
			return err
		}
		arr, err := w.Sequence(set.seed)
		if err != nil {
			return err
		}
		cfg, policies, err := set.policies(arr, w.Duration, w.Speed())
		if err != nil {
			return fmt.Errorf("workload %s: %w", w.Name, err)
		}
		file := strings.NewReplacer(":", "-", "/", "-").Replace(w.Name)
		closeDecisions, err := set.writeDecisions(file, policies)
		if err != nil {
			return err
		}
		results, opt := runPolicies(cfg, policies, set.minR, set.maxR)
		if err := closeDecisions(); err != nil {
			return err
		}
		results = append(results, opt.Result)
		st := workloads.Measure(g, w.Duration)
		meanWork := policysim.WorkBetween(arr, cfg.Capacity, 0, w.Duration)
		fmt.Printf("workload=%s gpu_speed=%g duration=%s mean_work=%.2f %s\n  %s\n", w.Name, set.gpuSpeed*w.Speed(), w.Duration, meanWork, st, w.Summary)
		printTable("  ", results, opt)
		if err := writeTimeline(filepath.Join(out, "sim-timeline-"+file+".csv"), results); err != nil {
			return err
		}
		byPolicy := map[string]policysim.Result{}
		for _, r := range results {
			byPolicy[r.Policy] = r
		}
		summary = append(summary, workloadResults{w.Name, byPolicy})
		if err := policysim.Plot(filepath.Join(out, "sim-"+file+".png"), results, set.sloTTFT); err != nil {
			return err
		}
		infeasible := 0
		for _, x := range opt.Infeasible {
			if x {
				infeasible++
			}
		}
		fmt.Printf("workload.%s.optimum.search minutes_tried=%d infeasible_minutes=%d\n", w.Name, opt.Tries, infeasible)
		// What a policy that meets each minute's need once it has happened, a cold start late,
		// pays with a perfect capacity model: the optimum's counts held for a cold start and a
		// minute (see OptimumResult.HeldFor).
		held := int(cfg.ColdStart/time.Minute) + 1
		fmt.Printf("workload.%s.optimum.held_%dm_vs_optimum=%.3f\n", w.Name, held, opt.HeldFor(held))
		for _, r := range results {
			v := policysim.Against(r, opt)
			fmt.Printf("workload.%s.%s slo_minutes=%.3f gpu_hours=%.3f scale_events=%d oscillations_per_hour=%.1f errors=%d slo_minutes_vs_optimum=%.3f optimum_slo_minutes=%.3f slo_gap=%.3f gpu_hours_vs_optimum=%.3f met_where_optimum_missed=%d\n",
				w.Name, r.Policy, r.SLOMinutes, r.GPUHours, r.ScaleEvents, r.Oscillations, r.Errors, v.SLOMinutes, v.OptimumSLOMinutes, v.SLOGap, v.GPUHoursRatio, v.MetInfeasible)
			if r.Policy == opt.Policy {
				continue
			}
			w0 := worst[r.Policy]
			if len(w0) == 0 {
				w0 = []worstOf{{value: math.Inf(-1)}, {value: math.Inf(-1)}, {value: math.Inf(-1)}}
			}
			if v.SLOGap > w0[0].value {
				w0[0] = worstOf{v.SLOGap, w.Name}
			}
			if v.GPUHoursRatio > w0[1].value {
				w0[1] = worstOf{v.GPUHoursRatio, w.Name}
			}
			// Direction changes per hour over HPA-70's (a policy that never turns against an HPA
			// that never turns: 1).
			osc := 1.0
			if h := resultNamed(results, "hpa-gpu70").Oscillations; h > 0 {
				osc = r.Oscillations / h
			} else if r.Oscillations > 0 {
				osc = math.Inf(1)
			}
			if osc > w0[2].value {
				w0[2] = worstOf{osc, w.Name}
			}
			if _, seen := worst[r.Policy]; !seen {
				order = append(order, r.Policy)
			}
			worst[r.Policy] = w0
		}
	}
	// Per policy, over the workloads: the largest SLO-minute shortfall below the optimum's, the
	// largest GPU-hours ratio to it and the largest ratio of direction changes to HPA-70's, each
	// with the workload that sets it.
	for _, p := range order {
		w0 := worst[p]
		fmt.Printf("%s.slo_gap_max=%.3f workload=%s\n%s.gpu_hours_vs_optimum_max=%.3f workload=%s\n%s.oscillations_vs_hpa_max=%.3f workload=%s\n",
			p, w0[0].value, w0[0].workload, p, w0[1].value, w0[1].workload, p, w0[2].value, w0[2].workload)
	}
	printSLOFirstSummary(os.Stdout, summary)
	fmt.Printf("workloads=%d\nwall_seconds=%.1f\n", len(ws), time.Since(began).Seconds())
	return nil
}

// printTable prints the policy table with each policy's figures against the optimum.
func printTable(indent string, results []policysim.Result, opt policysim.OptimumResult) {
	fmt.Printf("%s%-20s %10s %10s %8s %8s %10s %8s %10s %10s\n", indent, "policy", "slo_min", "gpu_hours", "events", "osc/h", "requests", "errors", "slo_vs_opt", "gpu_vs_opt")
	for _, r := range results {
		v := policysim.Against(r, opt)
		fmt.Printf("%s%-20s %10.3f %10.2f %8d %8.1f %10d %8d %10.3f %10.3f\n", indent, r.Policy, r.SLOMinutes, r.GPUHours, r.ScaleEvents, r.Oscillations, r.Requests, r.Errors, v.SLOMinutes, v.GPUHoursRatio)
	}
}
