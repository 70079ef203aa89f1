package peerbench

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelship/modelship/test/framework/devenv"
	"github.com/modelship/modelship/test/framework/stack"
)

// Options shape the scenarios; every contender gets the same.
type Options struct {
	Stack  *stack.Stack
	Client client.Client
	// RateScale is the trace's rate at the start of a scenario; StepFactor multiplies it at
	// StepAt into the autoscaling scenario (the load step).
	RateScale, StepFactor float64
	// ScaleDuration is the autoscaling scenario's length; Prometheus stops at OutageAt for
	// Outage (mid-scaling), and for Outage once the third rollout has reached its first step.
	ScaleDuration, StepAt, OutageAt, Outage time.Duration
	// Images: the workload starts at BaseImage; GoodImage is a good release, BadImage a slower
	// one (the simulator's profile makes it so), OutageImage a good release rolled out across
	// the Prometheus outage.
	BaseImage, GoodImage, BadImage, OutageImage string
	// Settle is the wait between a workload serving and the start of its scenario (longer than
	// the simulator's cold start).
	Settle time.Duration
	// VerdictTimeout bounds each rollout; BadHorizon is how long the bad release is watched
	// from its start (its requests are counted over it, whatever the verdict).
	VerdictTimeout, BadHorizon time.Duration
	// Log prints progress.
	Log func(format string, args ...any)
	// Round numbers the repetitions of the scenarios (0 or 1: the first); each round has
	// namespaces of its own, so that it does not wait for the last one's to be deleted.
	Round int
}

// Run is one contender's run of one scenario.
type Run struct {
	Contender, Scenario, Namespace string
	// Round is Options.Round, at least 1.
	Round  int
	Start  time.Time
	Points []Point
	// Events are the moments the scenario acted or saw a verdict ("step", "outage-start",
	// "good", "good-verdict", ...).
	Events map[string]time.Time
	// Verdicts of the rollouts by name ("good", "bad", "outage").
	Verdicts map[string]string
}

func (r *Run) mark(name string) time.Time {
	now := time.Now()
	r.Events[name] = now
	return now
}

// sleepUntil waits until t or ctx's end.
func sleepUntil(ctx context.Context, t time.Time) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(t)):
		return nil
	}
}

// prepare creates the namespace and the workload, waits for it to serve, restarts the
// simulator so that the trace starts anew for this contender, and starts the sampler.
func (o *Options) prepare(ctx context.Context, k Contender, scenario string, autoscaled bool) (*Run, *Sampler, context.CancelFunc, error) {
	ns := scenario + "-" + k.Name()
	if o.Round > 1 {
		ns += fmt.Sprintf("-%d", o.Round)
	}
	if err := o.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, nil, nil, err
	}
	if err := k.Deploy(ctx, o.Client, ns, o.BaseImage, autoscaled); err != nil {
		return nil, nil, nil, fmt.Errorf("%s: deploying: %w", k.Name(), err)
	}
	if err := WaitServing(ctx, o.Client, k, ns, 4*time.Minute); err != nil {
		return nil, nil, nil, err
	}
	// Let the pods load their model (the simulator's cold start) before the clock starts.
	if err := sleepUntil(ctx, time.Now().Add(o.Settle)); err != nil {
		return nil, nil, nil, err
	}
	if err := o.Stack.RestartSimulator(o.RateScale); err != nil {
		return nil, nil, nil, err
	}
	run := &Run{Contender: k.Name(), Scenario: scenario, Namespace: ns, Round: max(o.Round, 1), Start: time.Now(), Events: map[string]time.Time{}, Verdicts: map[string]string{}}
	s := &Sampler{Client: o.Client, SimURL: o.Stack.SimulatorURL, Namespace: ns,
		State: func(ctx context.Context) (State, error) { return k.State(ctx, o.Client, ns) }}
	sctx, cancel := context.WithCancel(ctx)
	go s.Run(sctx)
	o.Log("%s %s: serving in %s; the trace starts", k.Name(), scenario, ns)
	return run, s, cancel, nil
}

// finish stops sampling, keeps the points and deletes the namespace, waiting for its GPU pods
// to be gone so that the next contender finds the nodes free.
func (o *Options) finish(ctx context.Context, run *Run, s *Sampler, cancel context.CancelFunc) {
	cancel()
	run.Points = s.Points()
	_ = o.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: run.Namespace}})
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		var pods corev1.PodList
		if err := o.Client.List(ctx, &pods, client.InNamespace(run.Namespace)); err == nil && len(pods.Items) == 0 {
			return
		}
		time.Sleep(2 * time.Second)
	}
	o.Log("%s: pods of %s still there after 3 minutes", run.Contender, run.Namespace)
}

// prometheusOutage stops Prometheus now and starts it again after d.
func (o *Options) prometheusOutage(ctx context.Context, run *Run, d time.Duration) error {
	p := o.Stack.Env.Process(devenv.PartPrometheus)
	if err := p.Stop(); err != nil {
		return fmt.Errorf("stopping Prometheus: %w", err)
	}
	start := run.mark("outage-start")
	o.Log("%s %s: Prometheus stopped for %s", run.Contender, run.Scenario, d)
	err := sleepUntil(ctx, start.Add(d))
	if rerr := p.Restart(); rerr != nil {
		return fmt.Errorf("restarting Prometheus: %w", rerr)
	}
	run.mark("outage-end")
	o.Log("%s %s: Prometheus is back", run.Contender, run.Scenario)
	return err
}

// Autoscaling replays the trace to the contender's autoscaled workload: at StepAt the load
// steps up by StepFactor, at OutageAt Prometheus stops for Outage, and the run ends at
// ScaleDuration.
func (o *Options) Autoscaling(ctx context.Context, k Contender) (*Run, error) {
	run, s, cancel, err := o.prepare(ctx, k, "scale", true)
	if err != nil {
		return nil, err
	}
	defer o.finish(context.WithoutCancel(ctx), run, s, cancel)
	if err := sleepUntil(ctx, run.Start.Add(o.StepAt)); err != nil {
		return run, err
	}
	if err := o.Stack.RestartSimulator(o.RateScale * o.StepFactor); err != nil {
		return run, err
	}
	run.mark("step")
	o.Log("%s scale: the load steps up %gx", k.Name(), o.StepFactor)
	if err := sleepUntil(ctx, run.Start.Add(o.OutageAt)); err != nil {
		return run, err
	}
	if err := o.prometheusOutage(ctx, run, o.Outage); err != nil {
		return run, err
	}
	return run, sleepUntil(ctx, run.Start.Add(o.ScaleDuration))
}

// Rollouts runs three rollouts on the contender's fixed-size workload: a good release, a
// slower one watched for BadHorizon, and a good one across a Prometheus outage that starts
// once it has reached its first step.
func (o *Options) Rollouts(ctx context.Context, k Contender) (*Run, error) {
	run, s, cancel, err := o.prepare(ctx, k, "rollout", false)
	if err != nil {
		return nil, err
	}
	defer o.finish(context.WithoutCancel(ctx), run, s, cancel)
	if err := sleepUntil(ctx, run.Start.Add(20*time.Second)); err != nil {
		return run, err
	}
	for _, r := range []struct{ name, image string }{{"good", o.GoodImage}, {"bad", o.BadImage}, {"outage", o.OutageImage}} {
		if err := k.SetImage(ctx, o.Client, run.Namespace, r.image); err != nil {
			return run, fmt.Errorf("%s: rolling out %s: %w", k.Name(), r.image, err)
		}
		began := run.mark(r.name)
		o.Log("%s rollout: %s release %s", k.Name(), r.name, r.image)
		outage := r.name == "outage"
		verdict := Undecided
		for verdict == Undecided && time.Since(began) < o.VerdictTimeout {
			if outage {
				if st, err := k.State(ctx, o.Client, run.Namespace); err == nil && st.Weight > 0 {
					if err := o.prometheusOutage(ctx, run, o.Outage); err != nil {
						return run, err
					}
					outage = false
				}
			}
			if verdict, err = k.Verdict(ctx, o.Client, run.Namespace, r.image, began); err != nil {
				o.Log("%s rollout: reading the verdict: %v", k.Name(), err)
			}
			if verdict == Undecided {
				if err := sleepUntil(ctx, time.Now().Add(time.Second)); err != nil {
					return run, err
				}
			}
		}
		run.Verdicts[r.name] = verdict
		if verdict != Undecided {
			run.mark(r.name + "-verdict")
		}
		o.Log("%s rollout: %s release: %q after %s", k.Name(), r.name, verdict, time.Since(began).Round(time.Second))
		next := time.Now().Add(15 * time.Second)
		if r.name == "bad" {
			next = began.Add(o.BadHorizon)
		}
		if err := sleepUntil(ctx, next); err != nil {
			return run, err
		}
		run.mark(r.name + "-end")
	}
	return run, nil
}
