package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/test/framework/fleet"
	"github.com/modelship/modelship/test/sim/policysim"
	"k8s.io/utils/ptr"
)

func init() {
	register("sim", "policy simulator: replays a trace in virtual time against modelship's autoscaler and the peers' policies", runSim)
}

func runSim(args []string) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	tracePath := fs.String("trace", shippedTrace, "request trace CSV (TIMESTAMP,ContextTokens,GeneratedTokens)")
	speed := fs.Float64("speed", 1, "trace seconds per simulated second")
	rateScale := fs.Float64("rate-scale", 12, "multiplies the number of requests")
	sloTTFT := fs.Duration("slo-ttft", 2*time.Second, "p95 time-to-first-token SLO")
	sloITL := fs.Duration("slo-itl", 100*time.Millisecond, "p95 inter-token latency SLO")
	coldStart := fs.Duration("cold-start", 3*time.Minute, "time from pod creation to serving (model load)")
	minR := fs.Int("min-replicas", 2, "lower bound of every policy")
	maxR := fs.Int("max-replicas", 30, "upper bound of every policy")
	out := fs.String("out", ".work/bench", "directory for the timeline CSV and the PNG plot")
	seed := fs.Uint64("seed", 1, "seed of the replay and the fleet")
	msTarget := fs.Float64("modelship-work-per-replica", 0.57, "modelship's prometheus work metric target per replica")
	msWaiting := fs.Int64("modelship-waiting-per-replica", 2, "modelship's requestsWaiting target per replica (0: no queue metric)")
	msDown := fs.Duration("modelship-scale-down-window", 180*time.Second, "the scale-down stabilization window of modelship's recipe (part of it) and saturation policies")
	sloDown := fs.Duration("slo-scale-down-window", autoscale.DefaultScaleDownWindow, "modelship-slo's scale-down stabilization window (default: the API's, as a ModelServer stating only its SLO gets)")
	outage := fs.String("outage", "", "span FROM:TO (e.g. 20m:30m) during which the pods' metrics are missing from Prometheus")
	nanSpan := fs.String("nan", "", "span FROM:TO during which the pods' metrics are NaN in Prometheus (series present)")
	aaRuns := fs.Int("aa-runs", 200, "seeded rollouts of an identical candidate (false rollbacks)")
	msTol := fs.Float64("modelship-tolerance", 0.1, "modelship's tolerance")
	msUp := fs.Duration("modelship-scale-up-window", 0, "modelship's scale-up stabilization window")
	only := fs.String("policies", "", "comma-separated policy names to run (default all)")
	judgeSpec := fs.String("judge-workloads", "trace@1,trace@6,trace@7,bursty@4,trace@1@1,trace@1.5@2,bursty@1@2", "workloads of the judge matrix: comma-separated trace@SCALE, bursty@SCALE and matrix:NAME, each optionally @REPLICAS, the stable fleet (\"\": none)")
	judgeRuns := fs.Int("judge-runs", 200, "runs per workload and candidate (identical, 1.5x and 3x slower) of the judge matrix")
	judgeOnly := fs.Bool("judge-only", false, "run only the judge matrix")
	fs.BoolVar(&judgeExplain, "judge-explain", false, "print, for every identical candidate (A/A) the judge rolled back, the Fail results that did it (metric, step, look, z, threshold, effective counts)")
	judgeCands := fs.String("judge-candidates", "1.25,1.5,3", "the judge matrix's slower candidates, as latency multipliers (an identical one always runs)")
	fs.Func("judge-load-matching", "the judge matrix's spec.rollout.loadMatching (None, StablePods; default: the API's)", func(v string) error {
		switch lm := v1alpha1.LoadMatching(v); lm {
		case v1alpha1.LoadMatchingNone, v1alpha1.LoadMatchingStablePods:
			judgeRollout.loadMatching = lm
			return nil
		}
		return fmt.Errorf("want None or StablePods")
	})
	fs.Func("judge-failure-limit", "the judge matrix's spec.rollout.failureLimit: failed measurements tolerated before a rollback (default: the API's 0)", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return fmt.Errorf("want a count of 0 or more, got %q", v)
		}
		judgeRollout.failureLimit = ptr.To(int32(n))
		return nil
	})
	fs.DurationVar(&judgeRollout.minStep, "judge-min-step", 0, "the judge matrix's spec.rollout.minStepDuration: a step ends after it on a confident pass (0: unset, every step lasts the API's 2m)")
	fs.DurationVar(&judgeRollout.stepDuration, "judge-step-duration", 0, "the judge matrix's spec.rollout.stepDuration (0: the API's 2m)")
	fs.DurationVar(&judgeRollout.interval, "judge-interval", 0, "the judge matrix's spec.rollout.analysis.interval (0: the API's 30s)")
	fs.DurationVar(&judgeRollout.scrape, "judge-scrape-interval", 0, "the judge matrix's spec.rollout.analysis.scrapeInterval, a multiple of 5s (0: the simulated Prometheus's 15s)")
	gpuSpeed := fs.Float64("gpu-speed", 1, "the simulated GPUs' speed relative to the token rates modelship's work query assumes (0.7: 30% slower); with --workload it multiplies each workload's own")
	decisions := fs.Bool("decisions", false, "write every pass of each modelship policy (what it read, the capacity learnt, the count and its proposals' messages) to sim-decisions[-WORKLOAD]-POLICY.txt in --out")
	workload := fs.String("workload", "", "run the autoscaling policies on workloads of the matrix (test/sim/workloads): a name, comma-separated names, or 'matrix' for all; --trace, when not the shipped trace, is added at --rate-scale")
	matrixBase := fs.String("matrix-base", shippedTrace, "the shipped trace the matrix's replays are built from")
	if err := fs.Parse(args); err != nil {
		return err
	}
	began := time.Now()
	tr, err := fleet.LoadTrace(*tracePath)
	if err != nil {
		return err
	}
	judgeWorkloads, err := parseJudgeWorkloads(*judgeSpec, tr, fleet.DefaultCapacity().AtSpeed(*gpuSpeed))
	if err != nil {
		return err
	}
	candidates, err := parseJudgeCandidates(*judgeCands)
	if err != nil {
		return err
	}
	if *judgeOnly {
		return runJudge(judgeWorkloads, candidates, *judgeRuns, fleet.DefaultCapacity().AtSpeed(*gpuSpeed), *seed, *sloTTFT, *coldStart)
	}
	set := simSettings{
		sloTTFT: *sloTTFT, sloITL: *sloITL, coldStart: *coldStart, minR: int32(*minR), maxR: int32(*maxR), seed: *seed,
		msTarget: *msTarget, msWaiting: *msWaiting, msDown: *msDown, sloDown: *sloDown, msUp: *msUp, msTol: *msTol,
		gpuSpeed: *gpuSpeed, only: *only,
	}
	if *decisions {
		set.decisions = *out
	}
	if *workload != "" && (*outage != "" || *nanSpan != "") {
		return fmt.Errorf("--outage and --nan apply to the single-trace run, not with --workload %q", *workload)
	}
	if *workload != "" {
		// The matrix: every named workload (or all), plus --trace when it is not the shipped one.
		return runMatrix(*workload, *matrixBase, tr, *tracePath, *speed, *rateScale, set, *out)
	}
	rp, err := fleet.NewReplay(tr, fleet.ReplayOptions{Speed: *speed, RateScale: *rateScale, Seed: *seed})
	if err != nil {
		return err
	}
	dur := rp.CycleDuration().Truncate(time.Minute)
	arr := rp.Until(dur)
	cfg, policies, err := set.policies(arr, dur, 1)
	if err != nil {
		return err
	}
	capa := cfg.Capacity
	for _, o := range []struct {
		flag, span string
		nan        bool
	}{{"outage", *outage, false}, {"nan", *nanSpan, true}} {
		if o.span == "" {
			continue
		}
		from, to, ok := strings.Cut(o.span, ":")
		f, err1 := time.ParseDuration(from)
		t, err2 := time.ParseDuration(to)
		if !ok || err1 != nil || err2 != nil || t <= f {
			return fmt.Errorf("--%s %q: want FROM:TO durations with FROM < TO, such as 20m:30m", o.flag, o.span)
		}
		cfg.Outages = append(cfg.Outages, policysim.Outage{From: f, To: t, NaN: o.nan})
	}
	closeDecisions, err := set.writeDecisions("", policies)
	if err != nil {
		return err
	}
	results, opt := runPolicies(cfg, policies, set.minR, set.maxR)
	if err := closeDecisions(); err != nil {
		return err
	}
	results = append(results, opt.Result)
	autoscaleWall := time.Since(began)
	byName := map[string]policysim.Result{}
	for _, r := range results {
		byName[r.Policy] = r
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	csvPath := filepath.Join(*out, "sim-timeline.csv")
	if err := writeTimeline(csvPath, results); err != nil {
		return err
	}
	pngPath := filepath.Join(*out, "sim.png")
	if err := policysim.Plot(pngPath, results, *sloTTFT); err != nil {
		return err
	}
	rollouts, aa, err := runRolloutScenarios(tr, capa, *seed, *aaRuns, *sloTTFT, *coldStart)
	if err != nil {
		return err
	}
	fmt.Printf("trace=%s requests=%d duration=%s rate_scale=%g cold_start=%s slo_ttft=%s slo_itl=%s gpu_speed=%g outage=%q nan=%q\n", *tracePath, len(arr), dur, *rateScale, *coldStart, *sloTTFT, *sloITL, *gpuSpeed, *outage, *nanSpan)
	printTable("", results, opt)
	fmt.Printf("timeline=%s\nplot=%s\nautoscale_wall_seconds=%.1f\nwall_seconds=%.1f\n", csvPath, pngPath, autoscaleWall.Seconds(), time.Since(began).Seconds())
	ms, hpa := byName["modelship"], byName["hpa-gpu70"]
	fmt.Printf("slo_minutes=%.3f\n", ms.SLOMinutes)
	fmt.Printf("gpu_hours_vs_hpa70=%.3f\n", ratio(ms.GPUHours, hpa.GPUHours))
	printVersus("", results, opt)
	fmt.Printf("oscillations_vs_hpa70=%.3f\n", ratio(ms.Oscillations, hpa.Oscillations))
	fmt.Printf("bad_canary_requests_vs_flagger=%.3f\n", ratio(float64(rollouts["bad/modelship"].CandidateRequests), float64(rollouts["bad/flagger"].CandidateRequests)))
	fmt.Printf("false_rollbacks=%d\n", aa.rolledBack)
	for _, r := range results {
		v := policysim.Against(r, opt)
		fmt.Printf("%s.slo_minutes=%.3f\n%s.gpu_hours=%.3f\n%s.scale_events=%d\n%s.oscillations_per_hour=%.1f\n%s.errors=%d\n%s.slo_minutes_vs_optimum=%.3f\n%s.gpu_hours_vs_optimum=%.3f\n",
			r.Policy, r.SLOMinutes, r.Policy, r.GPUHours, r.Policy, r.ScaleEvents, r.Policy, r.Oscillations, r.Policy, r.Errors, r.Policy, v.SLOMinutes, r.Policy, v.GPUHoursRatio)
	}
	fmt.Printf("aa_promoted=%d\naa_slowest_promotion_s=%.0f\n", aa.promoted, aa.slowest.Seconds())
	for _, k := range sortedKeys(rollouts) {
		r := rollouts[k]
		fmt.Printf("rollout.%s.outcome=%s\nrollout.%s.decided_after_s=%.0f\nrollout.%s.candidate_requests=%d\nrollout.%s.unavailable=%d\n",
			k, r.Outcome, k, r.DecidedAfter.Seconds(), k, r.CandidateRequests, k, r.Unavailable)
	}
	fmt.Printf("aa_runs=%d\n", *aaRuns)
	return runJudge(judgeWorkloads, candidates, *judgeRuns, capa, *seed, *sloTTFT, *coldStart)
}

// runJudge runs and prints the judge matrix (see judge.go).
func runJudge(workloads []judgeWorkload, candidates []judgeCandidate, runs int, capa fleet.Capacity, seed uint64, slo, coldStart time.Duration) error {
	if len(workloads) == 0 || runs <= 0 {
		return nil
	}
	began := time.Now()
	cells, err := runJudgeMatrix(workloads, candidates, runs, judgeBase(capa, slo, coldStart), seed)
	if err != nil {
		return err
	}
	printJudgeMatrix(workloads, candidates, cells)
	fmt.Printf("judge_runs=%d judge_wall_seconds=%.1f\n", runs, time.Since(began).Seconds())
	return nil
}

// judgeBase is the judge matrix's rollout before each workload and run set theirs: a run starts
// two minutes in and stops at 42 (40 minutes of rollout).
func judgeBase(capa fleet.Capacity, slo, coldStart time.Duration) policysim.RolloutConfig {
	return policysim.RolloutConfig{Replicas: rolloutReplicas, Capacity: capa, StartAt: 2 * time.Minute,
		Horizon: 42 * time.Minute, Tick: 5 * time.Second, Step: 50 * time.Millisecond, SLOTTFT: slo, ColdStart: coldStart}
}

// learnPercent is the share of the capacity at the SLO's edge that modelship's target is:
// oraclePerReplica is the edge on the nominal GPU.
func learnPercent(target float64) *int32 {
	p := int32(math.Round(100 * target / oraclePerReplica))
	return &p
}

// oraclePerReplica is the share of a replica's time at which the replica model still meets the
// default SLO (the old per-minute oracle's share; it sizes the initial fleet and learnPercent).
const oraclePerReplica = 0.6

// saturationSpec is the saturation metric with llm-d's thresholds (and the recipe's scale-down
// window), to compare llm-d's rule with the rest on the same fleet.
func saturationSpec(lo, hi int32, down time.Duration) v1alpha1.AutoscalingSpec {
	return v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(lo)), MaxReplicas: hi,
		Metrics:  []v1alpha1.AutoscalingMetric{{Saturation: &v1alpha1.SaturationMetric{}}},
		Behavior: v1alpha1.ScalingBehavior{ScaleDown: &v1alpha1.ScalingRules{StabilizationWindow: &v1alpha1.Duration{Duration: down}}},
	}
}

// Rollout scenarios: the trace at a quarter of the autoscaling run's rate on 8 pods per color,
// the candidate deployed at 2m, followed for 30m.
const (
	rolloutRateScale = 4
	rolloutReplicas  = 8
)

// runRolloutScenarios runs the 1.5x-slower and the identical candidate under modelship,
// Flagger and Argo Rollouts, then aa A/A runs of modelship (each a scenario of its own: its
// own replay seed and starting point in the trace), and returns the results by "bad/<strategy>" and "good/<strategy>" and
// the number of A/A runs rolled back.
func runRolloutScenarios(tr fleet.Trace, capa fleet.Capacity, seed uint64, aa int, slo, coldStart time.Duration) (map[string]policysim.RolloutResult, aaSummary, error) {
	rp, err := fleet.NewReplay(tr, fleet.ReplayOptions{RateScale: rolloutRateScale, Seed: seed, Loop: true})
	if err != nil {
		return nil, aaSummary{}, err
	}
	arr := rp.Until(2 * rp.CycleDuration())
	base := policysim.RolloutConfig{Arrivals: arr, Replicas: rolloutReplicas, Capacity: capa, StartAt: 2 * time.Minute,
		Horizon: 32 * time.Minute, Tick: 5 * time.Second, Step: 50 * time.Millisecond, Seed: seed, SLOTTFT: slo, ColdStart: coldStart}
	type job struct {
		key string
		cfg policysim.RolloutConfig
		c   func() policysim.Canary
		// arrivals, when set, makes the run's own arrivals (an A/A run's replay), in the job.
		arrivals func() ([]fleet.Arrival, error)
	}
	var jobs []job
	for _, q := range []struct {
		name string
		mult float64
	}{{"bad", 1.5}, {"good", 1}} {
		cfg := base
		cfg.Candidate = fleet.Profile{LatencyMultiplier: q.mult}
		jobs = append(jobs,
			job{q.name + "/modelship", cfg, func() policysim.Canary { return policysim.NewModelshipRollout(rolloutReplicas) }, nil},
			job{q.name + "/flagger", cfg, func() policysim.Canary { return policysim.NewFlagger(rolloutReplicas, slo) }, nil},
			job{q.name + "/argo-rollouts", cfg, func() policysim.Canary { return policysim.NewArgo(rolloutReplicas, slo) }, nil})
	}
	for i := range aa {
		cfg := base
		cfg.Seed = seed + uint64(i) + 1
		cfg.Arrivals = nil
		cfg.StopWhenDecided = true
		// Every A/A run is a scenario of its own: a replay thinned and duplicated by its own
		// seed, started at its own point of the trace (aa offsets spread over one pass), so that
		// no two runs see the same requests.
		off := aaOffset(i, aa, rp.CycleDuration())
		runSeed := cfg.Seed
		arrivals := func() ([]fleet.Arrival, error) {
			r, err := fleet.NewReplay(tr, fleet.ReplayOptions{RateScale: rolloutRateScale, Seed: runSeed, Loop: true})
			if err != nil {
				return nil, err
			}
			return shift(r.Until(off+2*rp.CycleDuration()), off), nil
		}
		jobs = append(jobs, job{fmt.Sprintf("aa/%d", i), cfg, func() policysim.Canary { return policysim.NewModelshipRollout(rolloutReplicas) }, arrivals})
	}
	out := make([]policysim.RolloutResult, len(jobs))
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if j.arrivals != nil {
				if j.cfg.Arrivals, errs[i] = j.arrivals(); errs[i] != nil {
					return
				}
			}
			out[i] = policysim.RunRollout(j.cfg, j.c())
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, aaSummary{}, err
	}
	res := map[string]policysim.RolloutResult{}
	falseRollbacks := 0
	var aaStats aaSummary
	for i, j := range jobs {
		if strings.HasPrefix(j.key, "aa/") {
			if out[i].Outcome == policysim.OutcomeRolledBack {
				falseRollbacks++
			}
			if out[i].Outcome == policysim.OutcomePromoted {
				aaStats.promoted++
				aaStats.slowest = max(aaStats.slowest, out[i].DecidedAfter)
			}
			continue
		}
		res[j.key] = out[i]
	}
	aaStats.rolledBack = falseRollbacks
	return res, aaStats, nil
}

// aaSummary sums the A/A runs: rolled back (false rollbacks), promoted, the slowest promotion.
type aaSummary struct {
	rolledBack, promoted int
	slowest              time.Duration
}

// shift drops the arrivals before off and re-bases the rest to start at 0.
// aaOffset is where A/A run i of aa starts in the trace: aa points spread over one pass, so that
// runs never share a start (before, run i started at (i mod 50)/2 minutes: 200 runs were 50
// scenarios, four times over).
func aaOffset(i, aa int, cycle time.Duration) time.Duration {
	return time.Duration(i) * cycle / time.Duration(max(aa, 1))
}

func shift(arr []fleet.Arrival, off time.Duration) []fleet.Arrival {
	out := make([]fleet.Arrival, 0, len(arr))
	for _, a := range arr {
		if a.At >= off {
			a.At -= off
			out = append(out, a)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// peakWork is the largest one-minute work of the first minutes.
func peakWork(arr []fleet.Arrival, c fleet.Capacity, minutes int) float64 {
	var w float64
	for m := range minutes {
		w = max(w, policysim.WorkBetween(arr, c, time.Duration(m)*time.Minute, time.Duration(m+1)*time.Minute))
	}
	return w
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

func writeTimeline(path string, results []policysim.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"policy", "minute", "work", "requests", "errors", "pods", "serving", "ttft_p95_s", "itl_p95_s", "slo_met"})
	for _, r := range results {
		for _, m := range r.Timeline {
			_ = w.Write([]string{r.Policy, strconv.Itoa(int(m.At / time.Minute)), fmt.Sprintf("%.3f", m.Work),
				strconv.Itoa(m.Requests), strconv.Itoa(m.Errors), strconv.Itoa(m.Pods), strconv.Itoa(m.Serving),
				fmt.Sprintf("%.3f", m.TTFTP95), fmt.Sprintf("%.4f", m.ITLP95), strconv.FormatBool(m.Met)})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
