package signals

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/metrics"
)

// An endpoint picker of llm-d's router exports its running requests as llm_d_epp_request_running
// (with fairness and priority labels), not inference_objective_running_requests: the
// RunningRequests signal reads it, summed per namespace and model name as Prometheus's engine
// answers it.
func TestRunningRequestsReadLLMDsEndpointPickerName(t *testing.T) {
	const target = `job="ml/llama-epp",namespace="ml"`
	running := promVector(t, map[string]float64{
		`llm_d_epp_request_running{` + target + `,model_name="meta-llama/Llama-3.1-8B-Instruct",target_model_name="llama",fairness_id="a",priority="0"}`:  30,
		`llm_d_epp_request_running{` + target + `,model_name="meta-llama/Llama-3.1-8B-Instruct",target_model_name="llama",fairness_id="b",priority="10"}`: 18,
		`llm_d_epp_request_running{` + target + `,model_name="other",target_model_name="other",fairness_id="a",priority="0"}`:                             7,
	}, QueryObjectiveRunning, []metrics.Series{
		{Labels: map[string]string{"namespace": "ml", "model_name": "meta-llama/Llama-3.1-8B-Instruct"}, Value: 48},
		{Labels: map[string]string{"namespace": "ml", "model_name": "other"}, Value: 7},
	})
	q := &fakeQuerier{series: map[string][]metrics.Series{QueryObjectiveRunning: running}}
	snap, err := Fetch(context.Background(), q, DefaultQueries(), t0)
	if err != nil {
		t.Fatal(err)
	}
	spec := newSpec(1, 20, func(s *v1alpha1.AutoscalingSpec) {
		s.Metrics = append(s.Metrics, v1alpha1.AutoscalingMetric{EndpointPicker: &v1alpha1.EndpointPickerMetric{
			Signal: v1alpha1.EndpointPickerRunningRequests, Target: resource.MustParse("16"), Objective: "meta-llama/Llama-3.1-8B-Instruct"}})
	}, noWindow)
	pools := []autoscale.Pool{{Key: pod("ml", "llama-blue"), Ready: 2}, {Key: pod("ml", "llama-green"), Ready: 0}}
	got := snap.Observe(spec, nil, pools...)
	if len(got) != 1 || got[0].Status != metrics.OK || got[0].Value != 48 {
		t.Errorf("RunningRequests observed %+v, want 48 from llm_d_epp_request_running", got)
	}
}
