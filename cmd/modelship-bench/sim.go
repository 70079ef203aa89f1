package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/harness/fleet"
	"github.com/modelship/modelship/internal/harness/policysim"
	"github.com/modelship/modelship/internal/harness/testenv"
)

func init() {
	register("sim", "autoscaling policies replayed on a request trace in virtual time: SLO minutes, GPU-hours, scale events", runSim)
}

// simPolicies are the contenders, fresh for each run.
func simPolicies() []policysim.Policy {
	gpuAndQueue := v1alpha1.AutoscalingSpec{MinReplicas: 2, MaxReplicas: 10, Metrics: []v1alpha1.AutoscalingMetric{
		{GPUUtilization: &v1alpha1.GPUUtilizationMetric{Target: 70}},
		{RequestsWaiting: &v1alpha1.PerReplicaMetric{TargetPerReplica: resource.MustParse("5")}},
	}}
	return []policysim.Policy{
		policysim.HPAOnGPU(),
		policysim.KEDAQueue(),
		&policysim.Modelship{Label: "modelship-gpu70-queue5", Spec: gpuAndQueue},
	}
}

func runSim(args []string) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	trace := fs.String("trace", filepath.Join(testenv.RepoRoot(), "test", "traces", "azure-llm-2023-conv.csv"), "request trace CSV (TIMESTAMP,ContextTokens,GeneratedTokens)")
	speed := fs.Float64("speed", 1, "replay speed (2 = the trace's hour in 30 minutes)")
	rateScale := fs.Float64("rate-scale", 4, "requests per trace request (the trace serves ~5 req/s; 4 makes it need several replicas)")
	coldStart := fs.Duration("cold-start", 3*time.Minute, "time from a new replica to serving (model load)")
	ttft := fs.Duration("slo-ttft", 2*time.Second, "SLO on the p95 time to first token of a minute")
	itl := fs.Duration("slo-itl", 100*time.Millisecond, "SLO on the p95 inter-token latency of a minute")
	out := fs.String("out", ".work/bench/sim", "folder for the timeline CSV")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tr, err := fleet.LoadTrace(*trace)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	opts := policysim.Options{Trace: tr, Speed: *speed, RateScale: *rateScale, ColdStart: *coldStart, TTFT: *ttft, ITL: *itl}
	fmt.Printf("sim: %s, %d requests x%.2f at speed %.1f, cold start %s, SLO p95 TTFT <= %s and p95 ITL <= %s per minute\n",
		filepath.Base(*trace), len(tr.Requests), *rateScale, *speed, *coldStart, *ttft, *itl)
	var results []policysim.Result
	for _, p := range simPolicies() {
		began := time.Now()
		r, err := policysim.Run(p, opts)
		if err != nil {
			return err
		}
		results = append(results, r)
		fmt.Printf("%-24s SLO minutes %5.1f%%  GPU-hours %5.2f  scale events %3d  oscillations/h %4.1f  refused %d of %d  (%s)\n",
			r.Policy, 100*r.SLOAttainment, r.GPUHours, r.ScaleEvents, r.OscillationsPerHr, r.Refused, r.Requests, time.Since(began).Round(time.Millisecond))
	}
	path := filepath.Join(*out, "timeline.csv")
	if err := writeTimeline(path, results); err != nil {
		return err
	}
	png := filepath.Join(*out, "sim.png")
	if err := plotSim(png, results, ttft.Seconds()); err != nil {
		return err
	}
	fmt.Printf("timeline: %s, plot: %s\n", path, png)
	for _, r := range results {
		fmt.Printf("policy=%s slo_attainment=%.3f gpu_hours=%.2f scale_events=%d oscillations_per_hour=%.1f refused=%d requests=%d\n",
			r.Policy, r.SLOAttainment, r.GPUHours, r.ScaleEvents, r.OscillationsPerHr, r.Refused, r.Requests)
	}
	return nil
}

func writeTimeline(path string, results []policysim.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"policy", "minute", "requests", "errors", "replicas", "serving", "ttft_p95_s", "itl_p95_s", "meets_slo"})
	for _, r := range results {
		for _, m := range r.Timeline {
			_ = w.Write([]string{r.Policy, strconv.Itoa(int(m.At.Minutes())), strconv.Itoa(m.Requests), strconv.Itoa(m.Errors),
				strconv.Itoa(int(m.Replicas)), strconv.Itoa(int(m.Serving)), fmt.Sprintf("%.3f", m.TTFTP95.Seconds()),
				fmt.Sprintf("%.4f", m.ITLP95.Seconds()), strconv.FormatBool(m.MeetsSLO)})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return f.Close()
}
