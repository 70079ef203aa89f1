package plan

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/metrics"
)

// The batch limit comes from the pod template's --max-num-seqs: with 64 stated and 2 Ready
// replicas running 120 requests, the SLO's batch guard asks for ceil(120 / (0.85 x 64)) = 3;
// without the flag the same signals hold 2.
func TestAutoscaleReadsTheBatchLimitFromTheTemplate(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sig := Signals{
		RequestsWaiting: autoscale.Observation{Metric: autoscale.MetricRequestsWaiting, Status: metrics.OK},
		RequestsRunning: autoscale.Observation{Metric: autoscale.SignalRequestsRunning, Status: metrics.OK, Value: 120},
		TTFTP95:         autoscale.Observation{Status: metrics.OK, Value: 0.3},
		ITLP95:          autoscale.Observation{Status: metrics.OK, Value: 0.03},
		Load:            autoscale.Observation{Metric: autoscale.MetricSLO, Status: metrics.OK, Value: 1.7},
		Ready:           2,
	}
	for _, tc := range []struct {
		name string
		args []string
		want int32
	}{
		{name: "with --max-num-seqs=64", args: []string{"--model", "m", "--max-num-seqs=64"}, want: 3},
		{name: "without the flag", args: []string{"--model", "m"}, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := modelServer()
			ms.Spec.Autoscaling.Metrics = nil
			ms.Spec.Autoscaling.SLO = &v1alpha1.LatencySLO{TTFTP95: &v1alpha1.Duration{Duration: 2 * time.Second}}
			ms.Spec.Template.Spec.Containers[0].Args = tc.args
			ms.Status.Autoscaling.LearnedCapacities = []v1alpha1.LearnedCapacity{{Metric: autoscale.MetricSLO, PerReplica: "1", LastSampleTime: metav1.NewTime(now)}}
			out := Autoscale(ms, sig, nil, nil, now)
			if out.Desired != tc.want {
				t.Fatalf("desired %d, want %d (%+v)", out.Desired, tc.want, out.Status.Proposals)
			}
			if tc.want == 3 && !strings.Contains(out.Status.LastScaleReason, "batch limit 64") {
				t.Errorf("reason %q, want the batch limit named", out.Status.LastScaleReason)
			}
		})
	}
}
