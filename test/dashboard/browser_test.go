package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/cli"
	"github.com/modelship/modelship/internal/plan"
	"github.com/modelship/modelship/internal/testenv"
)

// The browser tests play the controller: they write the status the controller would write
// (as internal/cli's tests do), so what they check is the dashboard, not a rollout.

const ns = "ml"

// chromium finds the browser: $CHROMIUM (make test sets it from hack/chromium.sh), else PATH.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium: run `make test` (hack/chromium.sh installs Debian's chromium) or set CHROMIUM")
	return ""
}

// lockedBuffer is the dashboard command's output, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var servingAt = regexp.MustCompile(`at (http://\S+/\?token=\S+) `)

// startDashboard runs `kubectl modelship dashboard --kubeconfig K -n ml` (at a free port, the
// default) until the test ends and returns the URL it printed, with its token.
func startDashboard(t *testing.T, kubeconfig string) string {
	t.Helper()
	out := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cmd := cli.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: out})
	cmd.SetArgs([]string{"dashboard", "--kubeconfig", kubeconfig, "-n", ns})
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dashboard: %v", err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := servingAt.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("dashboard exited: %v\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("dashboard did not start:\n%s", out.String())
	return ""
}

type cluster struct {
	t *testing.T
	c client.Client
}

func (k *cluster) create(name string) {
	k.t.Helper()
	ms := &v1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ModelServerSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "server", Image: "vllm/vllm-openai:v0.9.2"},
			}}},
			Gateway: v1alpha1.GatewaySpec{ParentRefs: []gatewayv1.ParentReference{{Name: "inference"}}},
			Rollout: v1alpha1.RolloutSpec{Steps: []int32{10, 25, 50, 100}},
		},
	}
	if err := k.c.Create(context.Background(), ms); err != nil {
		k.t.Fatalf("creating modelserver %s: %v", name, err)
	}
}

func (k *cluster) get(name string) *v1alpha1.ModelServer {
	k.t.Helper()
	ms := &v1alpha1.ModelServer{}
	if err := k.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, ms); err != nil {
		k.t.Fatalf("reading modelserver %s: %v", name, err)
	}
	return ms
}

// setStatus writes the status the controller writes in phase: stable rev-a on blue and, during a
// rollout or after a rollback, candidate rev-b on green at step (candidate weight from the spec).
func (k *cluster) setStatus(name string, phase v1alpha1.Phase, step int32) {
	k.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ms := k.get(name)
		now := metav1.Now()
		st := v1alpha1.ModelServerStatus{
			ObservedGeneration: ms.Generation,
			Phase:              phase,
			Revision:           "rev-b",
			Stable:             &v1alpha1.ColorStatus{Color: v1alpha1.Blue, Revision: "rev-a", Image: "vllm/vllm-openai:v0.9.1", Replicas: 4, ReadyReplicas: 4},
			Weights:            v1alpha1.Weights{Stable: 100},
			Replicas:           4,
			ReadyReplicas:      4,
			Conditions:         plan.PhaseConditions(phase, ms.Generation),
			History: []v1alpha1.RevisionRecord{{Revision: "rev-a", Image: "vllm/vllm-openai:v0.9.1", Outcome: v1alpha1.OutcomePromoted,
				At: metav1.NewTime(now.Add(-time.Hour))}},
			Autoscaling: &v1alpha1.AutoscalingStatus{DesiredReplicas: 5, Proposals: []v1alpha1.Proposal{
				{Metric: "gpuUtilization", Value: "82", Target: "70", Replicas: ptr(int32(5))}}},
		}
		switch phase {
		case v1alpha1.PhaseProgressing, v1alpha1.PhasePaused, v1alpha1.PhaseRolledBack:
			st.Candidate = &v1alpha1.ColorStatus{Color: v1alpha1.Green, Revision: "rev-b", Image: "vllm/vllm-openai:v0.9.2", Replicas: 2, ReadyReplicas: 2, Warm: true}
			st.Replicas, st.ReadyReplicas = 6, 6
			if phase == v1alpha1.PhaseRolledBack {
				st.Rollout.RolledBackRevision = "rev-b"
				st.History = append(st.History, v1alpha1.RevisionRecord{Revision: "rev-b", Image: "vllm/vllm-openai:v0.9.2",
					Outcome: v1alpha1.OutcomeAborted, Reason: "aborted by a person", At: now})
				break
			}
			w := ms.Spec.Rollout.Steps[step-1]
			st.Rollout.Step, st.Weights = step, v1alpha1.Weights{Stable: 100 - w, Candidate: w}
			st.Rollout.StepStartedAt = &now
			st.Rollout.Analysis = []v1alpha1.MetricResult{
				{Name: "ttftP95", Candidate: "0.41", Stable: "0.39", Bound: "<= 1.2 x stable", Verdict: v1alpha1.VerdictPass,
					Message: "samples: candidate 412, stable 1630", At: now},
				{Name: "errorRate", Candidate: "0.001", Stable: "0.001", Bound: "<= 0.01", Verdict: v1alpha1.VerdictPass, At: now},
			}
		}
		for i := range st.Conditions {
			st.Conditions[i].LastTransitionTime = now
		}
		ms.Status = st
		return k.c.Status().Update(context.Background(), ms)
	})
	if err != nil {
		k.t.Fatalf("writing the status of %s: %v", name, err)
	}
}

func ptr[T any](v T) *T { return &v }

// event records an Event about the ModelServer name, as the controller's recorder does.
func (k *cluster) event(name, typ, reason, message string) {
	k.t.Helper()
	ms := k.get(name)
	now := metav1.Now()
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: name + ".", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "ModelServer", APIVersion: v1alpha1.GroupVersion.String(),
			Name: name, Namespace: ns, UID: ms.UID},
		Type: typ, Reason: reason, Message: message, Count: 1, FirstTimestamp: now, LastTimestamp: now,
		Source: corev1.EventSource{Component: "modelship-controller"},
	}
	if err := k.c.Create(context.Background(), e); err != nil {
		k.t.Fatalf("recording an event: %v", err)
	}
}

// kubeconfigFor writes a kubeconfig of user to a file and returns its path.
func kubeconfigFor(t *testing.T, env *envtest.Environment, user envtest.User) string {
	t.Helper()
	u, err := env.AddUser(user, nil)
	if err != nil {
		t.Fatalf("adding user %s: %v", user.Name, err)
	}
	b, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), user.Name+".kubeconfig")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// grantView lets user read ModelServers, Events and ControllerRevisions in ns, and nothing else.
func (k *cluster) grantView(user string) {
	k.t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "modelship-viewer", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"modelservers"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: []string{"get", "list", "watch"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "modelship-viewer", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := k.c.Create(ctx, o); err != nil {
			k.t.Fatalf("creating %T: %v", o, err)
		}
	}
}

// browser is one headless Chromium tab.
type browser struct{ ctx context.Context }

// do runs the steps with a time limit.
func (b browser) do(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// text is the visible text of the first node matching the CSS selector sel.
func (b browser) text(t *testing.T, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// location is the page's address.
func (b browser) location(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
	if err != nil {
		t.Fatalf("reading location: %v", err)
	}
	return v
}

// eval evaluates a JavaScript expression to a bool.
func (b browser) eval(t *testing.T, expr string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// screenshot saves the whole page as a PNG (for docs/, with MODELSHIP_SCREENSHOTS=docs).
func (b browser) screenshot(t *testing.T, path string) {
	t.Helper()
	b.do(t, chromedp.Sleep(300*time.Millisecond))
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("writing %s: %v", path, err)
	}
}

func visible(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(sel))
}

func click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible)
}

// waitText waits until the node matching sel shows want (a substring).
func waitText(sel, want string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.textContent.includes(%q); })()`, sel, want),
		chromedp.WithPollingTimeout(20*time.Second))
}

func TestDashboardInChromium(t *testing.T) {
	if ok, why := testenv.Available(); !ok {
		t.Skip(why)
	}
	chromiumPath := chromium(t)
	env, cfg, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	k := &cluster{t: t, c: c}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	k.create("llama")
	k.setStatus("llama", v1alpha1.PhaseProgressing, 2)
	k.create("mistral")
	k.setStatus("mistral", v1alpha1.PhaseHealthy, 0)
	k.create("qwen")
	k.setStatus("qwen", v1alpha1.PhaseProgressing, 2)
	k.event("qwen", corev1.EventTypeNormal, "StepAdvanced", "step 2 of 4: candidate rev-b at 25% (ttftP95 0.41 <= 1.2 x stable 0.39)")

	sre := kubeconfigFor(t, env, envtest.User{Name: "sre", Groups: []string{"system:masters"}})
	viewer := kubeconfigFor(t, env, envtest.User{Name: "viewer"})
	k.grantView("viewer")
	url := startDashboard(t, sre)

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1440, 1000))...)
	t.Cleanup(cancelAlloc)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(cancelTab)
	// The first action starts the browser and must run without a time limit.
	if err := chromedp.Do(tab, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", chromiumPath, err)
	}
	b := browser{ctx: tab}

	// page is the dashboard's address without the token: once the printed URL was opened, the
	// cookie carries it, and the pages below are reached by their fragment, as links do.
	page, _, _ := strings.Cut(url, "?")

	t.Run("without the printed URL's token the page is refused", func(t *testing.T) {
		b.do(t, chromedp.Navigate(page), visible(`body`))
		if body := b.text(t, `body`); !strings.Contains(body, "no valid token") {
			t.Errorf("the dashboard without its token shows %q, want the refusal", body)
		}
	})

	t.Run("the fleet page lists the ModelServers with their phase and weights", func(t *testing.T) {
		b.do(t, chromedp.Navigate(url), visible(`tr[data-key="ml/llama"]`), visible(`tr[data-key="ml/mistral"]`))
		if loc := b.location(t); loc != page {
			t.Errorf("the printed URL landed on %s, want %s (the token out of the address bar)", loc, page)
		}
		phase, weights := b.text(t, `tr[data-key="ml/llama"] td[data-field="phase"]`), b.text(t, `tr[data-key="ml/llama"] td[data-field="weights"]`)
		step := b.text(t, `tr[data-key="ml/llama"] td[data-field="step"]`)
		if phase != "Progressing" || weights != "75/25" || step != "step 2 of 4 (25%)" {
			t.Errorf("llama shows phase %q, weights %q, step %q; want Progressing, 75/25, step 2 of 4 (25%%)", phase, weights, step)
		}
		healthyPhase, healthyWeights := b.text(t, `tr[data-key="ml/mistral"] td[data-field="phase"]`), b.text(t, `tr[data-key="ml/mistral"] td[data-field="weights"]`)
		if healthyPhase != "Healthy" || healthyWeights != "100/0" {
			t.Errorf("mistral shows phase %q, weights %q; want Healthy, 100/0", healthyPhase, healthyWeights)
		}
		if dir := os.Getenv("MODELSHIP_SCREENSHOTS"); dir != "" {
			b.screenshot(t, filepath.Join(dir, "dashboard-fleet.png"))
		}
	})

	t.Run("a status change shows up without a reload", func(t *testing.T) {
		b.eval(t, `(window.__sameDocument = true)`)
		k.setStatus("llama", v1alpha1.PhaseProgressing, 3)
		b.do(t, waitText(`tr[data-key="ml/llama"] td[data-field="weights"]`, "50/50"))
		if !b.eval(t, `window.__sameDocument === true`) {
			t.Error("the page was reloaded to show the change; want it pushed to the open page")
		}
	})

	t.Run("a rollout page shows steps and measurements", func(t *testing.T) {
		b.do(t, chromedp.Navigate(page+"#/ml/qwen"), visible(`#steps li[data-state="current"]`), visible(`#measurements tr[data-metric="ttftP95"]`))
		current := b.text(t, `#steps li[data-state="current"]`)
		verdict := b.text(t, `#measurements tr[data-metric="ttftP95"] td:nth-child(7)`)
		samples := b.text(t, `#measurements tr[data-metric="ttftP95"] td:nth-child(8)`)
		if !strings.Contains(current, "Step 2") || !strings.Contains(current, "25%") {
			t.Errorf("current step shows %q, want step 2 at 25%%", current)
		}
		if verdict != "Pass" || samples != "candidate 412, stable 1630" {
			t.Errorf("ttftP95 row shows verdict %q, samples %q", verdict, samples)
		}
		if reason := b.text(t, `#events tbody tr td:nth-child(3)`); reason != "StepAdvanced" {
			t.Errorf("the first event shows reason %q, want the controller's StepAdvanced", reason)
		}
		if dir := os.Getenv("MODELSHIP_SCREENSHOTS"); dir != "" {
			b.screenshot(t, filepath.Join(dir, "dashboard-rollout.png"))
		}
	})

	t.Run("a pushed change keeps the buttons under the pointer", func(t *testing.T) {
		b.do(t, chromedp.Navigate(page+"#/ml/llama"), visible(`button[data-action="abort"]`))
		b.eval(t, `(window.__abort = document.querySelector('button[data-action="abort"]'), true)`)
		w := k.get("llama").Spec.Rollout.Steps[0]
		k.setStatus("llama", v1alpha1.PhaseProgressing, 1)
		b.do(t, waitText(`#detail-summary [data-field="weights"]`, fmt.Sprintf("%d/%d", 100-w, w)))
		if !b.eval(t, `document.querySelector('button[data-action="abort"]') === window.__abort`) {
			t.Error("the push rebuilt the Abort button: a click in flight would be lost")
		}
	})

	t.Run("abort clicked and confirmed sends the rollout back to stable", func(t *testing.T) {
		b.do(t, chromedp.Navigate(page+"#/ml/llama"), visible(`button[data-action="abort"]`),
			click(`button[data-action="abort"]`), visible(`#confirm-cancel`), click(`#confirm-cancel`),
			chromedp.WaitNotVisible(chromedp.CSS(`#confirm`)))
		if v, ok := k.get("llama").Annotations[v1alpha1.AnnotationAbort]; ok {
			t.Fatalf("a cancelled abort annotated the object (%s=%s)", v1alpha1.AnnotationAbort, v)
		}
		b.do(t, click(`button[data-action="abort"]`), visible(`#confirm-ok`), click(`#confirm-ok`), waitText(`#action-result`, "annotated"))
		if got := k.get("llama").Annotations[v1alpha1.AnnotationAbort]; got != "rev-b" {
			t.Fatalf("after the confirmed abort %s=%q, want the candidate rev-b; the page said %q",
				v1alpha1.AnnotationAbort, got, b.text(t, `#action-result`))
		}
		// The controller answers the annotation by sending all traffic to stable.
		k.setStatus("llama", v1alpha1.PhaseRolledBack, 0)
		b.do(t, waitText(`#detail-summary [data-field="phase"]`, "RolledBack"))
		if w := b.text(t, `#detail-summary [data-field="weights"]`); w != "100/0" {
			t.Errorf("after the abort the page shows weights %q, want 100/0", w)
		}
	})

	t.Run("a user without RBAC to patch sees the API server refuse the action", func(t *testing.T) {
		viewerURL := startDashboard(t, viewer)
		if token := func(u string) string { _, t, _ := strings.Cut(u, "?token="); return t }; token(viewerURL) == token(url) {
			t.Errorf("two launches printed the same token %s", token(url))
		}
		b.do(t, chromedp.Navigate(viewerURL+"#/ml/qwen"), visible(`button[data-action="pause"]`),
			click(`button[data-action="pause"]`), visible(`#confirm-ok`), click(`#confirm-ok`), waitText(`#action-error`, "refused"))
		refusal := b.text(t, `#action-error`)
		for _, want := range []string{`User "viewer" cannot patch resource "modelservers"`, "forbidden"} {
			if !strings.Contains(refusal, want) {
				t.Errorf("the refusal reads %q; want the API server's message with %q", refusal, want)
			}
		}
		if k.get("qwen").Spec.Paused {
			t.Error("the refused pause paused the rollout")
		}
	})
}
