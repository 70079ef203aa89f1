package telemetry

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

func rollingOut() *v1alpha1.ModelServer {
	return &v1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "llama"},
		Status: v1alpha1.ModelServerStatus{
			Phase: v1alpha1.PhaseProgressing, Weights: v1alpha1.Weights{Stable: 75, Candidate: 25},
			Stable:    &v1alpha1.ColorStatus{Color: v1alpha1.Blue, Revision: "abc", Replicas: 6, ReadyReplicas: 6},
			Candidate: &v1alpha1.ColorStatus{Color: v1alpha1.Green, Revision: "def", Replicas: 2, ReadyReplicas: 1},
			Rollout: v1alpha1.RolloutStatus{Step: 2,
				Analysis: []v1alpha1.MetricResult{{Name: "ttftP95", Candidate: "0.41", Stable: "0.39", Verdict: v1alpha1.VerdictPass}}},
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionScalingLimited, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonGPUCapacityLimited}},
		},
	}
}

func TestRecordExportsTheRolloutAndForgetRemovesIt(t *testing.T) {
	ms := rollingOut()
	Record(ms)
	checks := map[float64]float64{
		testutil.ToFloat64(phase.WithLabelValues("ml", "llama", "Progressing")):                  1,
		testutil.ToFloat64(phase.WithLabelValues("ml", "llama", "Healthy")):                      0,
		testutil.ToFloat64(step.WithLabelValues("ml", "llama")):                                  2,
		testutil.ToFloat64(weight.WithLabelValues("ml", "llama", "candidate")):                   25,
		testutil.ToFloat64(analysisValue.WithLabelValues("ml", "llama", "ttftP95", "candidate")): 0.41,
		testutil.ToFloat64(analysisVerdict.WithLabelValues("ml", "llama", "ttftP95", "Pass")):    1,
		testutil.ToFloat64(replicas.WithLabelValues("ml", "llama", "green", "ready")):            1,
		testutil.ToFloat64(limited.WithLabelValues("ml", "llama", "GPUCapacityLimited")):         1,
	}
	i := 0
	for got, want := range checks {
		if got != want {
			t.Errorf("check %d: %v, want %v", i, got, want)
		}
		i++
	}
	// The next status drops the analysis and the limit: their series go.
	ms.Status.Rollout.Analysis, ms.Status.Conditions, ms.Status.Phase = nil, nil, v1alpha1.PhaseHealthy
	Record(ms)
	if n := testutil.CollectAndCount(analysisValue); n != 0 {
		t.Errorf("%d analysis series left after the analysis ended", n)
	}
	if n := testutil.CollectAndCount(limited); n != 0 {
		t.Errorf("%d scaling-limited series left after the limit ended", n)
	}
	Forget(types.NamespacedName{Namespace: "ml", Name: "llama"})
	if n := testutil.CollectAndCount(phase) + testutil.CollectAndCount(replicas) + testutil.CollectAndCount(weight); n != 0 {
		t.Errorf("%d series left for a deleted ModelServer", n)
	}
}

func TestQueriesCountLatencyAndTimeouts(t *testing.T) {
	Query(30*time.Millisecond, nil, false)
	Query(3*time.Second, errors.New("deadline"), true)
	if got := testutil.ToFloat64(queryErrors.WithLabelValues("timeout")); got != 1 {
		t.Errorf("timeouts %v, want 1", got)
	}
	if n := testutil.CollectAndCount(queryDuration); n != 2 {
		t.Errorf("%d latency series, want ok and error", n)
	}
}

// TestTheDashboardReadsOnlyMetricsTheControllerExports keeps config/grafana/modelship.json in
// step with this package: every modelship_ series a panel queries is one the controller serves.
func TestTheDashboardReadsOnlyMetricsTheControllerExports(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "grafana", "modelship.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	exported := map[string]bool{}
	for _, n := range MetricNames() {
		exported[n] = true
	}
	used := regexp.MustCompile(`modelship_[a-z_]+`).FindAllString(string(b), -1)
	if len(used) == 0 {
		t.Fatal("the dashboard reads no modelship_ metric")
	}
	for _, u := range used {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(u, "_bucket"), "_sum"), "_count")
		if !exported[base] {
			t.Errorf("the dashboard reads %s, which the controller does not export", u)
		}
	}
}
