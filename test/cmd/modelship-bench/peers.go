package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	ctrl "sigs.k8s.io/controller-runtime"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/test/bench/peerbench"
	"github.com/modelship/modelship/test/bench/peers"
	"github.com/modelship/modelship/test/framework/devenv"
	"github.com/modelship/modelship/test/framework/stack"
)

func init() {
	register("peers", "modelship against the real KEDA + HPA, Flagger and Argo Rollouts on one local stack: autoscaling, rollouts, Prometheus outages (make bench-peers)", runPeers)
}

// runPeers starts one stack (control plane, kwok GPU nodes, Prometheus, the trace-driven fleet
// simulator, modelship's controller) and the peers, then runs each scenario for each
// contender, one after the other, and prints key=value figures, a CSV and a PNG.
func runPeers(args []string) error {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	dir := fs.String("dir", ".work/bench/peers", "working folder (logs, peers-timeline.csv, peers.png)")
	contenders := fs.String("contenders", "modelship,modelship-recipe,keda-hpa,flagger", "contenders to run, comma-separated (modelship-recipe, modelship-slo: autoscaling only, on the recipe or on the SLO of -slo-ttft and -slo-itl; keda-hpa: autoscaling only; flagger, argo-rollouts: rollouts only)")
	smoke := fs.Bool("smoke", false, "only start the stack and the peers, check that they answer and that the real HPA scales a Deployment from a KEDA ScaledObject (needs CAP_NET_ADMIN: KEDA's adapter gets an address of its own on lo)")
	smokeOutage := fs.Duration("smoke-outage", 0, "with -smoke or -flagger-smoke: then stop Prometheus this long and report what the HPA (or Flagger, during a fourth rollout) does")
	flaggerSmoke := fs.Bool("flagger-smoke", false, "only drive a Flagger Canary of a model-server Deployment through initialization, a promotion and a rollback (constant queries)")
	threshold := fs.Int("threshold", 2, "with -flagger-smoke: the Canary's analysis.threshold (failed checks that roll back)")
	rate := fs.Float64("rate-scale", 0.2, "the trace's rate at the start of each scenario (0.2: about 4 replicas' worth at 70% GPU)")
	stepFactor := fs.Float64("step-factor", 2, "the load step of the autoscaling scenario")
	scaleFor := fs.Duration("scale-duration", 6*time.Minute, "length of the autoscaling scenario")
	stepAt := fs.Duration("step-at", 90*time.Second, "when the load steps up")
	outageAt := fs.Duration("outage-at", 225*time.Second, "when Prometheus stops in the autoscaling scenario")
	outage := fs.Duration("outage", time.Minute, "how long Prometheus stays down")
	verdictTimeout := fs.Duration("verdict-timeout", 5*time.Minute, "longest wait for a rollout's verdict")
	badHorizon := fs.Duration("bad-horizon", 150*time.Second, "how long the slower release is watched (its requests are counted over it)")
	repeat := fs.Int("repeat", 1, "rounds of every scenario, contenders taking turns within a round; with more than one, the figures of each round and then each figure's median, min and max (the plot shows round 1, the CSV all)")
	loadMatching := fs.String("load-matching", string(v1alpha1.LoadMatchingStablePods), "modelship's spec.rollout.loadMatching in the rollouts (StablePods, the API's default; None: the step weights as written)")
	scrape := fs.Duration("scrape-interval", time.Second, "modelship's spec.rollout.analysis.scrapeInterval in the rollouts: the stack's Prometheus scrapes every second (0: the controller's flag, 8s, which the e2e stories run)")
	minStep := fs.Duration("min-step", 10*time.Second, "modelship's spec.rollout.minStepDuration in the rollouts: a step whose analysis passes confidently ends after it (0: unset, every step lasts -step-duration)")
	stepDuration := fs.Duration("step-duration", 10*time.Second, "modelship's spec.rollout.stepDuration in the rollouts: Flagger's cadence, its 10s interval holding each of its steps (0: the stack's 20s); -min-step is cut to it")
	scaleScrape := fs.Duration("scale-scrape-interval", 0, "modelship's spec.rollout.analysis.scrapeInterval in the autoscaling scenario, from which its serving window is derived (0: the controller's flag, 8s)")
	scenarios := fs.String("scenarios", "autoscaling,rollouts", "scenarios to run, comma-separated (autoscaling, rollouts)")
	sloTTFT := fs.Duration("slo-ttft", 2*time.Second, "p95 time-to-first-token SLO")
	sloITL := fs.Duration("slo-itl", 100*time.Millisecond, "p95 inter-token latency SLO")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *repeat < 1 {
		return fmt.Errorf("-repeat %d: want at least 1", *repeat)
	}
	if lm := v1alpha1.LoadMatching(*loadMatching); lm != v1alpha1.LoadMatchingNone && lm != v1alpha1.LoadMatchingStablePods {
		return fmt.Errorf("-load-matching %q: want %s or %s", *loadMatching, v1alpha1.LoadMatchingNone, v1alpha1.LoadMatchingStablePods)
	}
	want := map[string]bool{}
	for _, c := range strings.Split(*contenders, ",") {
		want[strings.TrimSpace(c)] = true
	}
	scenario := map[string]bool{}
	for _, sc := range strings.Split(*scenarios, ",") {
		switch sc = strings.TrimSpace(sc); sc {
		case "autoscaling", "rollouts":
			scenario[sc] = true
		default:
			return fmt.Errorf("-scenarios: unknown scenario %q (want autoscaling, rollouts)", sc)
		}
	}
	// The peers that run (the smoke tests start theirs); only those need be built (hack/peers.sh
	// for PEERS_FLAGS builds those).
	runFlagger := want["flagger"] || *smoke || *flaggerSmoke
	runKEDA := want["keda-hpa"] || *smoke
	if runFlagger {
		if ok, why := peers.FlaggerBuilt(); !ok {
			return fmt.Errorf("flagger is not built: %s", why)
		}
	}
	if runKEDA {
		if ok, why := peers.KEDABuilt(); !ok {
			return fmt.Errorf("keda is not built: %s", why)
		}
	}
	if want["argo-rollouts"] {
		if ok, why := peers.ArgoBuilt(); !ok {
			return fmt.Errorf("argo rollouts is not built: %s", why)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	abs, err := freshDir(*dir)
	if err != nil {
		return err
	}
	began := time.Now()
	logf := func(format string, args ...any) {
		fmt.Printf("[%s +%4.0fs] %s\n", time.Now().Format("15:04:05"), time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	ctrl.SetLogger(logr.Discard())
	log := funcr.New(func(_, args string) { logf("%s", args) }, funcr.Options{})
	// The CRDs of the peers that run (a peer not asked for need not be built).
	var crds []string
	if runFlagger {
		crds = append(crds, peers.FlaggerCRDDir())
	}
	if runKEDA {
		crds = append(crds, peers.KEDACRDDir())
	}
	if want["argo-rollouts"] {
		crds = append(crds, peers.ArgoCRDDirs()...)
	}
	st, err := stack.Start(ctx, stack.Options{
		Dir: abs, GPUNodes: 4, RateScale: *rate, Logger: log, CRDDirs: crds,
		// Every contender's requests go through Traefik to the pods' addresses; the load
		// generator counts the answers (fleet.MetricGatewayResponses, which the figures read).
		// Argo Rollouts' Traefik router writes TraefikServices: Traefik's kubernetescrd
		// provider serves them (the traefik.io CRDs are among ArgoCRDDirs).
		TraefikKubernetesCRD: want["argo-rollouts"],
		Profiles:             []string{"revision=" + slowMarker + ":latency=1.5"},
	})
	if err != nil {
		return err
	}
	defer st.Stop()
	logf("stack up (control plane, 4 GPU nodes of 8, Prometheus, fleet simulator, modelship)")

	if runFlagger {
		p, err := peers.StartFlagger(ctx, st.Env, st.Env.PrometheusURL())
		if err != nil {
			return err
		}
		logf("flagger %s answered %s after %s", peers.FlaggerVersion, p.Health, p.Ready.Round(time.Millisecond))
		if *flaggerSmoke {
			return runFlaggerSmoke(ctx, st.Env, st.Client, *threshold, *smokeOutage)
		}
	}
	if want["argo-rollouts"] {
		argo, err := peers.StartArgoRollouts(ctx, peers.ArgoOptions{Kubeconfig: st.Env.Kubeconfig(), Dir: abs})
		if err != nil {
			return err
		}
		defer func() { _ = argo.Stop() }()
		logf("argo-rollouts %s answered %s after %s", peers.ArgoRolloutsVersion, argo.Health, argo.Ready.Round(time.Millisecond))
	}
	if runKEDA {
		op, err := peers.StartKEDA(ctx, st.Env)
		if err != nil {
			return err
		}
		logf("keda-operator %s answered %s after %s", peers.KEDAVersion, op.Health, op.Ready.Round(time.Millisecond))
		if *smoke {
			return kedaSmoke(ctx, st.Env, op, *smokeOutage)
		}
		ad, err := peers.StartKEDAAdapter(ctx, st.Env, op, peers.KEDAAdapterOptions{})
		if err != nil {
			return err
		}
		logf("keda-adapter serves external.metrics.k8s.io on %s (APIService Available after %s)", ad.Address, ad.Available.Round(time.Millisecond))
	}

	o := &peerbench.Options{
		Stack: st, Client: st.Client, RateScale: *rate, StepFactor: *stepFactor,
		ScaleDuration: *scaleFor, StepAt: *stepAt, OutageAt: *outageAt, Outage: *outage,
		BaseImage: "vllm/vllm-openai:v0.10.0", GoodImage: "vllm/vllm-openai:v0.10.1",
		BadImage: "vllm/vllm-openai:v0.10.2" + slowMarker, OutageImage: "vllm/vllm-openai:v0.10.3",
		Settle: 15 * time.Second, VerdictTimeout: *verdictTimeout, BadHorizon: *badHorizon, Log: logf,
	}
	slo := peerbench.SLO{TTFT: *sloTTFT, ITL: *sloITL}
	type round struct{ scale, rollouts map[string]*peerbench.Run }
	var rounds []round
	var runs []*peerbench.Run
	prom := st.Env.PrometheusURL()
	for o.Round = 1; o.Round <= *repeat; o.Round++ {
		if *repeat > 1 {
			logf("round %d of %d", o.Round, *repeat)
		}
		rd := round{scale: map[string]*peerbench.Run{}, rollouts: map[string]*peerbench.Run{}}
		play := func(what string, scenario func(context.Context, peerbench.Contender) (*peerbench.Run, error), into map[string]*peerbench.Run, ks ...peerbench.Contender) error {
			for _, k := range ks {
				if !want[k.Name()] {
					continue
				}
				r, err := scenario(ctx, k)
				if err != nil {
					return fmt.Errorf("%s %s: %w", k.Name(), what, err)
				}
				into[k.Name()] = r
				runs = append(runs, r)
			}
			return nil
		}
		if scenario["autoscaling"] {
			if err := play("autoscaling", o.Autoscaling, rd.scale,
				peerbench.Modelship{ScaleScrapeInterval: *scaleScrape}, peerbench.Modelship{Recipe: true, ScaleScrapeInterval: *scaleScrape}, peerbench.Modelship{SLO: &slo, ScaleScrapeInterval: *scaleScrape}, peerbench.KEDAHPA{PrometheusURL: prom}); err != nil {
				return err
			}
		}
		if scenario["rollouts"] {
			if err := play("rollouts", o.Rollouts, rd.rollouts,
				peerbench.Modelship{LoadMatching: v1alpha1.LoadMatching(*loadMatching), ScrapeInterval: *scrape, MinStep: *minStep, StepDuration: *stepDuration}, peerbench.Flagger{PrometheusURL: prom},
				peerbench.ArgoRollouts{PrometheusURL: prom}); err != nil {
				return err
			}
		}
		rounds = append(rounds, rd)
	}
	csvPath, pngPath := filepath.Join(abs, "peers-timeline.csv"), filepath.Join(abs, "peers.png")
	if err := peerbench.WriteCSV(csvPath, runs); err != nil {
		return err
	}
	if err := peerbench.Plot(pngPath, rounds[0].scale, rounds[0].rollouts, slo); err != nil {
		return err
	}
	fmt.Printf("trace=%s rate_scale=%g step_factor=%g speed=10 slo_ttft=%s slo_itl=%s outage=%s rounds=%d took=%s\n",
		stack.DefaultTrace, *rate, *stepFactor, *sloTTFT, *sloITL, *outage, *repeat, time.Since(began).Round(time.Second))
	var lines [][]string
	for i, rd := range rounds {
		l := peerbench.Summary(rd.scale, rd.rollouts, o, slo)
		lines = append(lines, l)
		if len(rounds) > 1 {
			fmt.Printf("# round %d\n", i+1)
		}
		for _, s := range l {
			fmt.Println(s)
		}
	}
	if len(rounds) > 1 {
		fmt.Printf("# over the %d rounds\n", len(rounds))
		for _, s := range peerbench.Spread(lines) {
			fmt.Println(s)
		}
	}
	fmt.Printf("csv=%s\npng=%s\n", csvPath, pngPath)
	return nil
}

// slowMarker is in the slower release's image; the simulator's profile makes it 1.5x slower.
const slowMarker = "-slow"

// runFlaggerSmoke runs peers.FlaggerSmoke and prints its steps, the route and Services Flagger
// wrote, and key=value lines of the times.
func runFlaggerSmoke(ctx context.Context, env *devenv.Env, c client.Client, threshold int, outage time.Duration) error {
	report, err := peers.FlaggerSmoke(ctx, env, c, peers.SmokeOptions{Threshold: threshold, Outage: outage, Log: os.Stdout})
	if report == nil {
		return err
	}
	if report.Route != nil {
		fmt.Printf("HTTPRoute backends after initialization: %s\n", strings.Join(report.Route.Backends, " "))
	}
	for _, s := range report.Services {
		fmt.Printf("Service %s\n", s)
	}
	for _, s := range report.Steps {
		var weights []string
		for _, o := range s.History {
			if o.Route != nil && (len(weights) == 0 || weights[len(weights)-1] != fmt.Sprintf("%d/%d", o.Route.Primary, o.Route.Canary)) {
				weights = append(weights, fmt.Sprintf("%d/%d", o.Route.Primary, o.Route.Canary))
			}
		}
		status := "ok"
		if s.Note != "" {
			status = s.Note + "; " + status
		}
		if s.Err != nil {
			status = s.Err.Error()
		}
		fmt.Printf("%-10s reached %-12s after %6.1fs, route primary/canary %s: %s\n", s.Name, s.Reached, s.Took.Seconds(), strings.Join(weights, " -> "), status)
	}
	for _, s := range report.Steps {
		fmt.Printf("flagger_%s_s=%.1f ", s.Name, s.Took.Seconds())
	}
	fmt.Println()
	return err
}
