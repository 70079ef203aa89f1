package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/test/framework/fleet"
	"github.com/modelship/modelship/test/sim/policysim"
	"github.com/modelship/modelship/test/sim/workloads"
)

// The judge matrix: for every workload, runs A/A rollouts (an identical candidate) and
// rollouts of slower candidates, each run a scenario of its own (its own replay seed and its own
// start in the workload), under modelship's rollout with the API's defaults, and prints per
// workload the false rollbacks, the detection rate and the time to a verdict.

// judgeWorkload makes one run's arrivals: seed and offset pick the scenario.
type judgeWorkload struct {
	name string
	// arrivals returns the run's requests from its start (the candidate is deployed 2m in).
	arrivals func(seed uint64, run, runs int) ([]fleet.Arrival, error)
	// replicas is the stable color's pod count and speed the GPUs' speed relative to the
	// nominal capacity.
	replicas int32
	speed    float64
}

// judgeSizingWork is the work per replica (fleet.Capacity.Work) a matrix workload's stable fleet
// is sized for, as an autoscaler keeps it below the 0.8 where a replica stops serving well: the
// judge matrix measures the judge on a fleet that carries its load, and an overload is asked for
// by name (matrix:NAME@REPLICAS).
const judgeSizingWork = 0.7

// judgeCandidate is a candidate revision of the matrix: 1 is identical (A/A).
type judgeCandidate struct {
	name string
	mult float64
}

// parseJudgeCandidates reads --judge-candidates: comma-separated latency multipliers above 1
// (the regressions); the identical candidate (A/A) always runs first.
func parseJudgeCandidates(spec string) ([]judgeCandidate, error) {
	out := []judgeCandidate{{"aa", 1}}
	for _, f := range strings.Split(spec, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		m, err := strconv.ParseFloat(f, 64)
		if err != nil || m <= 1 {
			return nil, fmt.Errorf("--judge-candidates %q: want latency multipliers above 1 such as 1.5", f)
		}
		out = append(out, judgeCandidate{strconv.FormatFloat(m, 'g', -1, 64) + "x", m})
	}
	return out, nil
}

// parseJudgeWorkloads reads --judge-workloads: comma-separated trace@SCALE (the trace at that
// rollout rate scale), bursty@SCALE (the trace at that scale with every request moved to the
// start of its 20-second bin, so that the bin's requests arrive at once), either on
// rolloutReplicas stable pods or, as trace@SCALE@REPLICAS, on that many (a small fleet: one
// or two replicas, whose pods are too few to judge as units), and matrix:NAME (a
// workload of test/sim/workloads, shipped trace taken from --trace, on GPUs of its speed, its
// stable fleet sized for its mean work at judgeSizingWork per replica and at least
// rolloutReplicas; matrix:NAME@REPLICAS fixes the fleet, e.g. an overload); matrix is every
// workload of the matrix.
func parseJudgeWorkloads(spec string, tr fleet.Trace, capa fleet.Capacity) ([]judgeWorkload, error) {
	var out []judgeWorkload
	var names []string
	for _, w := range strings.Split(spec, ",") {
		if w = strings.TrimSpace(w); w != "matrix" {
			names = append(names, w)
			continue
		}
		for _, wl := range workloads.Matrix(tr) {
			names = append(names, "matrix:"+wl.Name)
		}
	}
	for _, w := range names {
		if w == "" {
			continue
		}
		if name, ok := strings.CutPrefix(w, "matrix:"); ok {
			// A workload of the matrix (test/sim/workloads), each run its own seed's sequence
			// from its own point of the workload: a replay of the shipped trace draws only
			// its copies' times from the seed, and a generated workload's shape (a flash
			// crowd, a ramp) stands at the same minute in every seed's sequence.
			name, fixed, pinned := strings.Cut(name, "@")
			wl, err := workloads.Find(workloads.Matrix(tr), name)
			if err != nil {
				return nil, fmt.Errorf("--judge-workloads %q: %w", w, err)
			}
			jw := judgeWorkload{name: w, speed: wl.Speed(), arrivals: func(seed uint64, run, runs int) ([]fleet.Arrival, error) {
				arr, err := wl.Sequence(seed)
				if err != nil {
					return nil, err
				}
				return rotate(arr, aaOffset(run, runs, wl.Duration), wl.Duration), nil
			}}
			if pinned {
				n, err := strconv.Atoi(fixed)
				if err != nil || n < 1 {
					return nil, fmt.Errorf("--judge-workloads %q: want matrix:NAME@REPLICAS with a positive count", w)
				}
				jw.replicas = int32(n)
			} else {
				arr, err := wl.Sequence(0)
				if err != nil {
					return nil, fmt.Errorf("--judge-workloads %q: %w", w, err)
				}
				work := policysim.WorkBetween(arr, capa.AtSpeed(jw.speed), 0, wl.Duration)
				jw.replicas = max(rolloutReplicas, int32(math.Ceil(work/judgeSizingWork)))
			}
			out = append(out, jw)
			continue
		}
		kind, scaleS, ok := strings.Cut(w, "@")
		replicas := int32(rolloutReplicas)
		if s, fixed, pinned := strings.Cut(scaleS, "@"); pinned {
			n, err := strconv.Atoi(fixed)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("--judge-workloads %q: want trace@SCALE@REPLICAS with a positive count", w)
			}
			scaleS, replicas = s, int32(n)
		}
		scale, err := strconv.ParseFloat(scaleS, 64)
		if !ok || err != nil || scale <= 0 {
			return nil, fmt.Errorf("--judge-workloads %q: want trace@SCALE or bursty@SCALE", w)
		}
		var burst time.Duration
		switch kind {
		case "trace":
		case "bursty":
			burst = 20 * time.Second
		default:
			return nil, fmt.Errorf("--judge-workloads %q: unknown kind %q (trace, bursty)", w, kind)
		}
		out = append(out, judgeWorkload{name: w, arrivals: traceArrivals(tr, scale, burst), replicas: replicas, speed: 1})
	}
	return out, nil
}

// traceArrivals replays the trace at a rate scale, run i of runs starting at its own point of
// one pass with its own replay seed; burst > 0 moves every arrival to the start of its bin of
// that length (bins phased by the seed).
func traceArrivals(tr fleet.Trace, scale float64, burst time.Duration) func(seed uint64, run, runs int) ([]fleet.Arrival, error) {
	return func(seed uint64, run, runs int) ([]fleet.Arrival, error) {
		r, err := fleet.NewReplay(tr, fleet.ReplayOptions{RateScale: scale, Seed: seed, Loop: true})
		if err != nil {
			return nil, err
		}
		off := aaOffset(run, runs, r.CycleDuration())
		arr := shift(r.Until(off+40*time.Minute), off)
		if burst > 0 {
			phase := time.Duration(rand.New(rand.NewPCG(seed, 7)).Int64N(int64(burst)))
			for i := range arr {
				arr[i].At = (arr[i].At+phase)/burst*burst - phase + burst
			}
			sort.SliceStable(arr, func(i, j int) bool { return arr[i].At < arr[j].At })
		}
		return arr, nil
	}
}

// rotate is a sequence of length d from off, wrapped around its end: the requests at off
// or later, then those before it, d later.
func rotate(arr []fleet.Arrival, off, d time.Duration) []fleet.Arrival {
	out := shift(arr, off)
	for _, a := range arr {
		if a.At < off {
			a.At += d - off
			out = append(out, a)
		}
	}
	return out
}

// judgeExplain (--judge-explain) prints the Fail results of every A/A run that was rolled back.
var judgeExplain bool

// judgeRollout is the judge matrix's spec.rollout from the --judge-* flags; a zero field keeps
// the API's default.
var judgeRollout struct {
	interval     time.Duration         // --judge-interval: analysis.interval (the API's 30s)
	stepDuration time.Duration         // --judge-step-duration: stepDuration (the API's 2m)
	minStep      time.Duration         // --judge-min-step: minStepDuration (unset)
	loadMatching v1alpha1.LoadMatching // --judge-load-matching: loadMatching (StablePods)
	scrape       time.Duration         // --judge-scrape-interval: analysis.scrapeInterval (the simulator's 15s)
	failureLimit *int32                // --judge-failure-limit: failureLimit (nil: the API's 0)
}

// applyJudgeRollout sets the fields of judgeRollout that are not zero on r.
func applyJudgeRollout(r *v1alpha1.RolloutSpec) {
	j := judgeRollout
	if j.interval > 0 {
		r.Analysis.Interval = v1alpha1.Duration{Duration: j.interval}
	}
	if j.stepDuration > 0 {
		r.StepDuration = v1alpha1.Duration{Duration: j.stepDuration}
	}
	if j.minStep > 0 {
		r.MinStepDuration = &v1alpha1.Duration{Duration: j.minStep}
	}
	if j.loadMatching != "" {
		r.LoadMatching = j.loadMatching
	}
	if j.failureLimit != nil {
		r.FailureLimit = *j.failureLimit
	}
	if j.scrape > 0 {
		// Prometheus scraping this seldom: the analysis's windows, settle time and blocks are
		// read at it (the simulator still snapshots every tick).
		r.Analysis.ScrapeInterval = &v1alpha1.Duration{Duration: j.scrape}
	}
}

// judgeFigures are one (workload, candidate) cell of the matrix.
type judgeFigures struct {
	runs, rolledBack, promoted, undecided int
	// decided are the times to the verdict of the runs that were rolled back (regressions) or
	// promoted (A/A).
	rollbackTimes, promoteTimes []time.Duration
	// candRequests are the requests the candidate served, per run.
	candRequests []uint64
}

// runJudgeMatrix runs the matrix, two runs at a time.
func runJudgeMatrix(workloads []judgeWorkload, judgeCandidates []judgeCandidate, runs int, base policysim.RolloutConfig, seed uint64) (map[string]*judgeFigures, error) {
	type job struct {
		cell string
		w    judgeWorkload
		c    judgeCandidate
		run  int
	}
	var jobs []job
	for _, w := range workloads {
		for _, c := range judgeCandidates {
			for i := range runs {
				jobs = append(jobs, job{cell: w.name + "/" + c.name, w: w, c: c, run: i})
			}
		}
	}
	results := make([]policysim.RolloutResult, len(jobs))
	failures := make([][]string, len(jobs))
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cfg := base
			cfg.Replicas, cfg.Capacity = j.w.replicas, base.Capacity.AtSpeed(j.w.speed)
			// Every run of a workload is a scenario of its own; a regression's run i sees the
			// same requests as the A/A run i.
			cfg.Seed = seed + uint64(j.run) + 1
			cfg.StopWhenDecided = true
			cfg.Candidate = fleet.Profile{LatencyMultiplier: j.c.mult}
			arr, err := j.w.arrivals(cfg.Seed, j.run, runs)
			if err != nil {
				errs[i] = err
				return
			}
			cfg.Arrivals = arr
			ms := policysim.NewModelshipRollout(cfg.Replicas)
			ms.EditRollout(applyJudgeRollout)
			results[i] = policysim.RunRollout(cfg, ms)
			failures[i] = ms.Failures()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	cells := map[string]*judgeFigures{}
	for i, j := range jobs {
		f := cells[j.cell]
		if f == nil {
			f = &judgeFigures{}
			cells[j.cell] = f
		}
		r := results[i]
		f.runs++
		f.candRequests = append(f.candRequests, r.CandidateRequests)
		switch r.Outcome {
		case policysim.OutcomeRolledBack:
			f.rolledBack++
			if judgeExplain && j.c.mult == 1 {
				for _, msg := range failures[i] {
					fmt.Printf("judge.%s.aa.rollback run=%d %s\n", j.w.name, j.run, msg)
				}
			}
			f.rollbackTimes = append(f.rollbackTimes, r.DecidedAfter)
		case policysim.OutcomePromoted:
			f.promoted++
			f.promoteTimes = append(f.promoteTimes, r.DecidedAfter)
		default:
			f.undecided++
		}
	}
	return cells, nil
}

// printJudgeMatrix prints one line per workload and candidate, then the summary lines, each
// with the workload that sets it.
func printJudgeMatrix(workloads []judgeWorkload, judgeCandidates []judgeCandidate, cells map[string]*judgeFigures) {
	type worst struct {
		v        float64
		workload string
	}
	var aaMax, slowest worst
	detectMin := map[string]*worst{}
	p50Max := map[string]*worst{}
	for _, w := range workloads {
		fmt.Printf("judge.%s.fleet stable_replicas=%d gpu_speed=%g\n", w.name, w.replicas, w.speed)
		for _, c := range judgeCandidates {
			f := cells[w.name+"/"+c.name]
			if f == nil {
				continue
			}
			key := "judge." + w.name + "." + c.name
			if c.mult == 1 {
				rate := float64(f.rolledBack) / float64(f.runs)
				fmt.Printf("%s.false_rollbacks=%d of %d (%.1f%%) promoted=%d undecided=%d promotion_s_p50=%.0f p90=%.0f max=%.0f candidate_requests_p50=%d\n",
					key, f.rolledBack, f.runs, 100*rate, f.promoted, f.undecided, seconds(f.promoteTimes, 0.5), seconds(f.promoteTimes, 0.9), seconds(f.promoteTimes, 1), quantileU(f.candRequests, 0.5))
				if rate >= aaMax.v {
					aaMax = worst{rate, w.name}
				}
				if s := seconds(f.promoteTimes, 1); s >= slowest.v {
					slowest = worst{s, w.name}
				}
				continue
			}
			rate := float64(f.rolledBack) / float64(f.runs)
			fmt.Printf("%s.detected=%d of %d (%.1f%%) promoted=%d undecided=%d detect_s_p50=%.0f p90=%.0f candidate_requests_p50=%d p90=%d\n",
				key, f.rolledBack, f.runs, 100*rate, f.promoted, f.undecided, seconds(f.rollbackTimes, 0.5), seconds(f.rollbackTimes, 0.9), quantileU(f.candRequests, 0.5), quantileU(f.candRequests, 0.9))
			if d := detectMin[c.name]; d == nil || rate < d.v {
				detectMin[c.name] = &worst{rate, w.name}
			}
			if d := p50Max[c.name]; d == nil || seconds(f.rollbackTimes, 0.5) > d.v {
				p50Max[c.name] = &worst{seconds(f.rollbackTimes, 0.5), w.name}
			}
		}
	}
	fmt.Printf("aa_false_rollback_rate_max=%.4f (%s)\n", aaMax.v, aaMax.workload)
	fmt.Printf("aa_slowest_promotion_s_max=%.0f (%s)\n", slowest.v, slowest.workload)
	for _, c := range judgeCandidates[1:] {
		name := strings.ReplaceAll(c.name, ".", "_")
		if d := detectMin[c.name]; d != nil {
			fmt.Printf("detect_%s_rate_min=%.4f (%s)\n", name, d.v, d.workload)
		}
		if d := p50Max[c.name]; d != nil {
			fmt.Printf("verdict_s_%s_p50_max=%.0f (%s)\n", name, d.v, d.workload)
			if c.mult == 1.5 {
				fmt.Printf("verdict_s_bad_p50_max=%.0f (%s)\n", d.v, d.workload)
			}
		}
	}
}

// seconds is the q-quantile of ds in seconds (nearest rank), NaN without any.
func seconds(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return math.NaN()
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)-1, max(0, int(math.Ceil(q*float64(len(s))))-1))
	return s[i].Seconds()
}

func quantileU(xs []uint64, q float64) uint64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, max(0, int(math.Ceil(q*float64(len(s))))-1))]
}
