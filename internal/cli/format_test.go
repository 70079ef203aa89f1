package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func rolloutInProgress() *v1alpha1.ModelServer {
	three := int32(3)
	return &v1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{Name: "llama", Namespace: "ml", UID: "u1", Generation: 2, CreationTimestamp: ago(26 * time.Hour)},
		Spec:       v1alpha1.ModelServerSpec{Rollout: v1alpha1.RolloutSpec{Steps: []int32{10, 50, 100}}},
		Status: v1alpha1.ModelServerStatus{
			ObservedGeneration: 2, Phase: v1alpha1.PhaseProgressing, Revision: "rev-b",
			Stable:    &v1alpha1.ColorStatus{Color: v1alpha1.Blue, Revision: "rev-a", Image: "img:a", Replicas: 2, ReadyReplicas: 2},
			Candidate: &v1alpha1.ColorStatus{Color: v1alpha1.Green, Revision: "rev-b", Image: "img:b", Replicas: 2, ReadyReplicas: 1, Warm: true},
			Weights:   v1alpha1.Weights{Stable: 50, Candidate: 50},
			Replicas:  4, ReadyReplicas: 3,
			Rollout: v1alpha1.RolloutStatus{
				Step: 2, StepStartedAt: ptrTime(ago(90 * time.Second)),
				Failures: 1, LastMeasuredAt: ptrTime(ago(20 * time.Second)),
				Analysis: []v1alpha1.MetricResult{
					{Name: "ttft-p95", Candidate: "0.31", Stable: "0.29", Bound: "<= 0.35 (1.2x stable)", Verdict: v1alpha1.VerdictPass, At: ago(20 * time.Second)},
					{Name: "error-ratio", Verdict: v1alpha1.VerdictInconclusive, Message: "42 requests < minSamples 50", At: ago(20 * time.Second)},
				},
			},
			Autoscaling: &v1alpha1.AutoscalingStatus{DesiredReplicas: 4, Proposals: []v1alpha1.Proposal{
				{Metric: "gpuUtilization", Value: "91", Target: "70", Replicas: &three},
				{Metric: "requestsWaiting", Message: "no data"},
			}, LearnedCapacities: []v1alpha1.LearnedCapacity{{Metric: "prometheus", PerReplica: "0.55", Samples: 3, LastSampleTime: ago(2 * time.Minute), Revision: "rev-a"}}},
		},
	}
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }

func TestTableShowsTheCandidateWeightOnlyDuringARollout(t *testing.T) {
	healthy := rolloutInProgress()
	healthy.Name = "mistral"
	healthy.Status.Phase, healthy.Status.Candidate = v1alpha1.PhaseHealthy, nil
	var b bytes.Buffer
	if err := writeTable(&b, []v1alpha1.ModelServer{*rolloutInProgress(), *healthy}, true, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := [][]string{
		{"NAMESPACE", "NAME", "PHASE", "STABLE", "CANDIDATE", "WEIGHT", "REPLICAS", "AGE"},
		{"ml", "llama", "Progressing", "rev-a", "rev-b", "50%", "3/4", "26h"},
		{"ml", "mistral", "Healthy", "rev-a", "<none>", "-", "3/4", "26h"},
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("line %d = %q, want %q", i, got, w)
		}
	}
}

func TestStatusShowsEachMetricAndProposal(t *testing.T) {
	var b bytes.Buffer
	if err := writeStatus(&b, rolloutInProgress(), nil, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Progressing, step 2 of 3 (50%), for 90s",
		"1 failed measurement(s) in this rollout, last measured 20s ago",
		"ttft-p95     0.31       0.29    <= 0.35 (1.2x stable)  Pass",
		"error-ratio  <none>     <none>  <none>                 Inconclusive  20s  42 requests < minSamples 50",
		"Autoscaling: desired 4",
		"gpuUtilization   91      70      3",
		"requestsWaiting  <none>  <none>  -         no data",
		"learnt capacity of prometheus: 0.55 per replica, from 3 sample(s), the last 2m ago, on revision rev-a",
		"candidate  green  rev-b     img:b  1/2    true",
		"Events: <none>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

func TestStatusSaysWhenTheControllerIsBehindTheSpec(t *testing.T) {
	ms := rolloutInProgress()
	ms.Generation = 3
	var b bytes.Buffer
	if err := writeStatus(&b, ms, nil, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "3 (observed 2): the controller has not acted on the latest spec yet") {
		t.Errorf("status does not flag a stale status:\n%s", b.String())
	}
}

func TestStatusNamesWhyTheIdleColorKeepsItsPods(t *testing.T) {
	ms := rolloutInProgress()
	ms.Status.Phase, ms.Status.Rollout.RolledBackRevision = v1alpha1.PhaseRolledBack, "rev-b"
	ms.Status.Rollout.InspectUntil = ptrTime(metav1.NewTime(now.Add(9 * time.Minute)))
	ms.Status.Rollout.DrainUntil = ptrTime(ago(time.Second)) // over: not shown
	var b bytes.Buffer
	if err := writeStatus(&b, ms, nil, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "Kept for inspection, scales down:  in 9m") {
		t.Errorf("status does not say the aborted candidate is kept for inspection:\n%s", out)
	}
	if strings.Contains(out, "Draining") || strings.Contains(out, "Previous stable") {
		t.Errorf("status shows a keep that is over or not set:\n%s", out)
	}
}

func TestRecentEventsKeepsTheObjectsNewestEventsInOrder(t *testing.T) {
	ms := rolloutInProgress()
	ev := func(name, kind, objName string, uid types.UID, at time.Duration) corev1.Event {
		return corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: kind, Name: objName, Namespace: "ml", UID: uid},
			LastTimestamp:  ago(at)}
	}
	got := recentEvents([]corev1.Event{
		ev("newest", "ModelServer", "llama", "u1", 1*time.Second),
		ev("other-kind", "Deployment", "llama", "u9", 2*time.Second),
		ev("old-incarnation", "ModelServer", "llama", "u0", 3*time.Second),
		ev("oldest", "ModelServer", "llama", "u1", 50*time.Second),
		ev("middle", "ModelServer", "llama", "", 10*time.Second),
		ev("dropped-by-limit", "ModelServer", "llama", "u1", 90*time.Second),
	}, ms, 3)
	var names []string
	for _, e := range got {
		names = append(names, e.Name)
	}
	if strings.Join(names, ",") != "oldest,middle,newest" {
		t.Errorf("events = %v, want oldest,middle,newest", names)
	}
}

// noWatch refuses every watch, as an API server or proxy that does not allow watches would.
type noWatch struct{ client.WithWatch }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("watch refused")
}

func TestWaitFallsBackToReReadingWhenTheWatchIsRefused(t *testing.T) {
	h := newFakeHarness(t)
	h.create("llama")
	h.setStatus("llama", v1alpha1.PhaseProgressing)
	out := &syncBuffer{}
	cmd := NewCommand(streams(out, &syncBuffer{}), WithClient(noWatch{h.c}, h.ns), WithPollInterval(50*time.Millisecond))
	cmd.SetArgs([]string{"wait", "llama", "--timeout", "20s"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(context.Background()) }()
	eventually(t, func() bool { return strings.Contains(out.String(), "Progressing") })
	h.setStatus("llama", v1alpha1.PhaseHealthy)
	if err := <-done; err != nil {
		t.Fatalf("wait: %v\n%s", err, out.String())
	}
}

func TestExitCodeReadsTheCodeThroughWrapping(t *testing.T) {
	inner := &ExitError{Code: ExitNeedsHuman, Err: errors.New("paused")}
	cases := []struct {
		name string
		err  error
		want int
	}{
		{"no error exits 0", nil, ExitOK},
		{"a plain error exits 1", errors.New("boom"), ExitFailure},
		{"an exit error gives its code even when wrapped", errWrap{inner}, ExitNeedsHuman},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ExitCode(c.err); got != c.want {
				t.Errorf("ExitCode = %d, want %d", got, c.want)
			}
		})
	}
}

type errWrap struct{ err error }

func (e errWrap) Error() string { return "wrapped: " + e.err.Error() }
func (e errWrap) Unwrap() error { return e.err }
