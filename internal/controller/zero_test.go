package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/rollout"
)

// "0/0 available" is Ready only while a metric that sees load without pods reads 0: with load
// and no pod, or with no such reading at all, Ready is False naming why, so that kubectl wait
// and Argo CD do not read a ModelServer that serves nobody as healthy. Pure: no API server.
func TestReadyAtZeroReplicasOnlyWhenNoLoadIsObserved(t *testing.T) {
	cases := []struct {
		name     string
		unserved string
		want     metav1.ConditionStatus
	}{
		{"idle at zero is Ready", "", metav1.ConditionTrue},
		{"load with no pod is not Ready", "0 replicas while prometheus reads 12: load with no pod to serve it", metav1.ConditionFalse},
		{"no reading at zero is not Ready", "0 replicas and no metric that sees load without pods has data (prometheus: NoData no data): nothing shows that no request waits", metav1.ConditionFalse},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := newModelServer("ns", "zero")
			ms.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAvailable, Message: "revision r on blue serves all traffic: 0/0 available"}}
			obs := observed{
				accepted: metav1.Condition{Type: v1alpha1.ConditionRouteAccepted, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonNoGatewayAnswer},
				scale:    &autoscale.Output{MetricsAvailable: true, LimitedReason: v1alpha1.ReasonWithinBounds, Unserved: tc.unserved},
			}
			(&ModelServerReconciler{}).completeStatus(ms, obs, rollout.Decision{})
			c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
			if c == nil || c.Status != tc.want {
				t.Fatalf("Ready = %+v, want %s", c, tc.want)
			}
			if tc.want == metav1.ConditionFalse && (c.Reason != v1alpha1.ReasonNoReplicaForLoad || c.Message != tc.unserved) {
				t.Errorf("Ready = %s %q, want reason %s with the autoscaler's message", c.Reason, c.Message, v1alpha1.ReasonNoReplicaForLoad)
			}
		})
	}
}
