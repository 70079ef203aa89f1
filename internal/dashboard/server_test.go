package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

func rollout(step int32, paused bool) *v1alpha1.ModelServer {
	ms := &v1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Name: "llama", Namespace: "ml", Generation: 2}}
	ms.Spec.Paused = paused
	ms.Spec.Rollout.Steps = []int32{10, 50, 100}
	ms.Status = v1alpha1.ModelServerStatus{
		ObservedGeneration: 2, Phase: v1alpha1.PhaseProgressing, Rollout: v1alpha1.RolloutStatus{Step: step},
		Stable:    &v1alpha1.ColorStatus{Color: v1alpha1.Blue, Revision: "a", Replicas: 3, ReadyReplicas: 3},
		Candidate: &v1alpha1.ColorStatus{Color: v1alpha1.Green, Revision: "b", Replicas: 1, ReadyReplicas: 1},
		Weights:   v1alpha1.Weights{Stable: 50, Candidate: 50},
		History:   []v1alpha1.RevisionRecord{{Revision: "a", Outcome: v1alpha1.OutcomePromoted}},
	}
	return ms
}

func TestStepsMarkDoneCurrentAndPending(t *testing.T) {
	got := StepsOf(rollout(2, false))
	want := []string{"done", "current", "pending"}
	for i, s := range got {
		if s.State != want[i] || s.Index != i+1 {
			t.Errorf("step %d: %+v, want state %s", i+1, s, want[i])
		}
	}
	healthy := rollout(0, false)
	healthy.Status.Phase, healthy.Status.Candidate = v1alpha1.PhaseHealthy, nil
	for _, s := range StepsOf(healthy) {
		if s.State != "done" {
			t.Errorf("a finished rollout shows step %d %s, want done", s.Index, s.State)
		}
	}
}

func TestActionsFollowThePhase(t *testing.T) {
	cases := map[string]struct {
		ms   *v1alpha1.ModelServer
		want string
	}{
		"running rollout": {rollout(1, false), "pause promote promote-full abort rollback"},
		"paused rollout":  {rollout(1, true), "resume promote promote-full abort rollback"},
		"healthy":         {func() *v1alpha1.ModelServer { m := rollout(0, false); m.Status.Phase = v1alpha1.PhaseHealthy; return m }(), "rollback"},
		"no status":       {&v1alpha1.ModelServer{}, ""},
	}
	for name, c := range cases {
		if got := strings.Join(ActionsOf(c.ms), " "); got != c.want {
			t.Errorf("%s: actions %q, want %q", name, got, c.want)
		}
	}
}

func TestMeasurementsCarryTheSampleCounts(t *testing.T) {
	ms := rollout(2, false)
	ms.Status.Rollout.Analysis = []v1alpha1.MetricResult{
		{Name: "ttftP95", Verdict: v1alpha1.VerdictInconclusive, Message: "too few samples: 12 < 50"},
		{Name: "itlP95", Verdict: v1alpha1.VerdictPass, Message: "z=0.3 (samples: candidate 40, stable 360)"},
	}
	got := MeasurementsOf(ms)
	if got[0].Samples != "12 (needs 50)" || got[1].Samples != "candidate 40, stable 360" || got[1].Step != 2 || got[1].Revision != "b" {
		t.Errorf("measurements %+v", got)
	}
}

func TestStaleStatusReadsInProgress(t *testing.T) {
	ms := rollout(1, false)
	ms.Generation = 3
	if h, msg := kstatus(ms); h != "InProgress" || !strings.Contains(msg, "generation 3") {
		t.Errorf("health %s (%s), want InProgress naming the unobserved generation", h, msg)
	}
}

func newTestServer(t *testing.T, act ActFunc, opts ...func(*Options)) (*Server, *httptest.Server) {
	t.Helper()
	o := Options{Client: fake.NewClientBuilder().WithScheme(testScheme(t)).Build(), Act: act, Namespace: "ml"}
	for _, f := range opts {
		f(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return s, srv
}

func post(t *testing.T, url, origin, contentType string) (int, actionResult) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(`{}`))
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	req.Header.Set("Content-Type", contentType)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	var body actionResult
	_ = json.NewDecoder(res.Body).Decode(&body)
	return res.StatusCode, body
}

func TestActionsRefuseOtherSitesAndPassTheAPIServersAnswer(t *testing.T) {
	var calls []Action
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "serving.modelship.dev", Resource: "modelservers"}, "llama",
		errors.New(`User "viewer" cannot patch resource "modelservers"`))
	_, srv := newTestServer(t, func(_ context.Context, ns, name string, a Action) (string, error) {
		calls = append(calls, a)
		if a.Verb == ActionPause {
			return "", forbidden
		}
		return "annotated", nil
	})
	url := srv.URL + "/api/modelservers/ml/llama/actions/"
	if code, _ := post(t, url+"abort", "http://evil.example", "application/json"); code != http.StatusForbidden {
		t.Errorf("a cross-origin abort got %d, want 403", code)
	}
	if code, _ := post(t, url+"abort", srv.URL, "text/plain"); code != http.StatusUnsupportedMediaType {
		t.Errorf("a form-encoded abort got %d, want 415 (a simple request any site can send)", code)
	}
	if code, _ := post(t, url+"delete", srv.URL, "application/json"); code != http.StatusNotFound {
		t.Errorf("an unknown action got %d, want 404", code)
	}
	if code, _ := post(t, srv.URL+"/api/modelservers/other/llama/actions/abort", srv.URL, "application/json"); code != http.StatusForbidden {
		t.Errorf("an action outside the dashboard's namespace got %d, want 403", code)
	}
	if len(calls) != 0 {
		t.Fatalf("refused requests reached the action code: %+v", calls)
	}
	code, body := post(t, url+"pause", srv.URL, "application/json")
	if code != http.StatusForbidden || !strings.Contains(body.Error, `cannot patch resource "modelservers"`) {
		t.Errorf("a pause the API server forbids got %d %q, want 403 with its message", code, body.Error)
	}
	code, body = post(t, url+"abort", srv.URL, "application/json")
	if code != http.StatusOK || body.Message != "annotated" {
		t.Errorf("abort got %d %+v", code, body)
	}
}

func TestGPUChartReadsPrometheusPerColor(t *testing.T) {
	var queries []string
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		q := r.Form.Get("query")
		queries = append(queries, q)
		v := "40"
		if strings.Contains(q, "llama-green") {
			v = "90"
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1700000000,"` + v + `"]]}]}}`))
	}))
	t.Cleanup(prom.Close)
	pc, err := promapi.NewClient(promapi.Config{Address: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newTestServer(t, func(context.Context, string, string, Action) (string, error) { return "", nil },
		func(o *Options) {
			o.Prometheus = promv1.NewAPI(pc)
			o.Now = func() time.Time { return time.Unix(1700000000, 0) }
		})
	series, msg := s.gpuSeries(context.Background(), rollout(1, false))
	if msg != "" {
		t.Fatal(msg)
	}
	if len(series["blue"]) != 1 || series["blue"][0].Value != 40 || series["green"][0].Value != 90 {
		t.Errorf("series %+v", series)
	}
	if len(queries) != 2 || !strings.Contains(queries[0], `pod=~"llama-blue-[a-z0-9]+-[a-z0-9]+"`) || !strings.Contains(queries[0], `exported_pod=~"llama-blue-[a-z0-9]+-[a-z0-9]+"`) {
		t.Errorf("queries %q", queries)
	}
}
