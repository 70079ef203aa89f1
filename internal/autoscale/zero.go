package autoscale

import (
	"fmt"
	"strings"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/sample"
)

// SeesLoadWithoutPods reports whether a metric measures load while no pod of the ModelServer
// runs, so that it can bring a ModelServer back from zero replicas: a prometheus total (a
// query of the user's), an external metric (a queue's depth), the gateway's request rate at the
// route, or the endpoint picker's running requests of a model name, counted where requests
// arrive.
// The pod metrics (gpuUtilization, requestsWaiting, kvCacheUsage, saturation, resource) and
// the endpoint picker's per-pod averages (QueueSize, PoolSaturation) have no data without
// pods: at zero replicas they would hold zero for ever.
func SeesLoadWithoutPods(m v1alpha1.AutoscalingMetric) bool {
	switch {
	case m.Prometheus != nil, m.External != nil, m.Gateway != nil:
		return true
	case m.EndpointPicker != nil:
		return m.EndpointPicker.Signal == v1alpha1.EndpointPickerRunningRequests
	}
	return false
}

// ScalesFromZero reports whether one of the metrics sees load without pods, which
// minReplicas 0 needs (the default metric, gpuUtilization, does not).
func ScalesFromZero(ms []v1alpha1.AutoscalingMetric) bool {
	for _, m := range ms {
		if SeesLoadWithoutPods(m) {
			return true
		}
	}
	return false
}

// unservedAtZero says why a total of 0 may leave requests without a pod: a metric that sees
// load without pods reads above 0, or none of them has a value (nothing shows that no request
// waits). It is empty when the total is above 0, or when such a metric reads 0 and none reads
// more.
func (s settings) unservedAtZero(obs []Observation, desired int32) string {
	if desired > 0 {
		return ""
	}
	byName := make(map[string]Observation, len(obs))
	for _, o := range obs {
		byName[o.Metric] = o
	}
	idle := false
	var missing []string
	for i, m := range s.metrics {
		if !SeesLoadWithoutPods(m) {
			continue
		}
		name := s.names[i]
		o, ok := byName[name]
		switch {
		case !ok:
			missing = append(missing, name+": not observed")
		case o.Status != sample.OK:
			missing = append(missing, fmt.Sprintf("%s: %s %s", name, o.Status, o.Message))
		case o.Value > 0:
			return fmt.Sprintf("0 replicas while %s reads %s: load with no pod to serve it", name, fmtNum(o.Value))
		default:
			idle = true
		}
	}
	if idle {
		return ""
	}
	if len(missing) == 0 {
		return "0 replicas and no metric that sees load without pods (prometheus, external, gateway, endpointPicker RunningRequests): nothing shows that no request waits"
	}
	return fmt.Sprintf("0 replicas and no metric that sees load without pods has data (%s): nothing shows that no request waits", strings.Join(missing, "; "))
}
