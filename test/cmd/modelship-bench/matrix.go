package main

import (
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
)

// shippedTrace is the trace the repository ships (test/traces/README.md), relative to the
// repository's root where make runs the bench.
const shippedTrace = "test/traces/azure-llm-2023-conv.csv"

// simSettings are the sim subcommand's flags that every autoscaling run shares.
type simSettings struct {
	sloTTFT, sloITL, coldStart time.Duration
	minR, maxR                 int32
	seed                       uint64
	oracleTarget, msTarget     float64
	msWaiting                  int64
	msDown, msUp               time.Duration
	msTol, gpuSpeed            float64
	only                       string
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
		&policysim.Modelship{Label: "modelship-gpu70", Start: start, Spec: v1alpha1.AutoscalingSpec{MinReplicas: lo, MaxReplicas: hi}},
		&policysim.Modelship{Label: "modelship-saturation", Start: start, Spec: saturationSpec(lo, hi, s.msDown)},
		policysim.NewHPA("hpa-gpu70", lo, hi, 70, false, func(sig policysim.Signals) (float64, bool) { return sig.GPUUtilization, sig.HasGPU }),
		policysim.NewKEDA(lo, hi, 5),
		&policysim.Oracle{Arrivals: arr, Capacity: capa, PerReplica: s.oracleTarget, Min: lo, Max: hi, Lookahead: time.Minute, Step: 15 * time.Second},
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

// runPolicies runs every policy on cfg, in parallel.
func runPolicies(cfg policysim.Config, policies []policysim.Policy) []policysim.Result {
	results := make([]policysim.Result, len(policies))
	var wg sync.WaitGroup
	for i, p := range policies {
		wg.Go(func() { results[i] = policysim.Run(cfg, p) })
	}
	wg.Wait()
	return results
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
		results := runPolicies(cfg, policies)
		st := workloads.Measure(g, w.Duration)
		meanWork := policysim.WorkBetween(arr, cfg.Capacity, 0, w.Duration)
		fmt.Printf("workload=%s gpu_speed=%g duration=%s mean_work=%.2f %s\n  %s\n", w.Name, set.gpuSpeed*w.Speed(), w.Duration, meanWork, st, w.Summary)
		fmt.Printf("  %-20s %10s %10s %8s %8s %10s %8s\n", "policy", "slo_min", "gpu_hours", "events", "osc/h", "requests", "errors")
		for _, r := range results {
			fmt.Printf("  %-20s %10.3f %10.2f %8d %8.1f %10d %8d\n", r.Policy, r.SLOMinutes, r.GPUHours, r.ScaleEvents, r.Oscillations, r.Requests, r.Errors)
		}
		file := strings.NewReplacer(":", "-", "/", "-").Replace(w.Name)
		if err := writeTimeline(filepath.Join(out, "sim-timeline-"+file+".csv"), results); err != nil {
			return err
		}
		for _, r := range results {
			fmt.Printf("workload.%s.%s slo_minutes=%.3f gpu_hours=%.3f scale_events=%d oscillations_per_hour=%.1f errors=%d\n",
				w.Name, r.Policy, r.SLOMinutes, r.GPUHours, r.ScaleEvents, r.Oscillations, r.Errors)
		}
	}
	fmt.Printf("workloads=%d\nwall_seconds=%.1f\n", len(ws), time.Since(began).Seconds())
	return nil
}
