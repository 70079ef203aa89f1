package routing

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

func TestReadyEndpointsCountsWhatAGatewayRoutesTo(t *testing.T) {
	ep := func(pod, addr string, ready *bool) discoveryv1.Endpoint {
		e := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
		if pod != "" {
			e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "ml", Name: pod}
		}
		return e
	}
	slice := func(eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{Endpoints: eps}
	}
	for _, tc := range []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		want   int32
	}{
		{"no slice has no endpoint", nil, 0},
		{"a slice with no endpoint (the controller's placeholder) has none", []discoveryv1.EndpointSlice{slice()}, 0},
		{"only ready endpoints count", []discoveryv1.EndpointSlice{slice(ep("a", "198.18.200.1", ptr.To(true)), ep("b", "198.18.200.2", ptr.To(false)))}, 1},
		{"an unset ready condition reads as ready", []discoveryv1.EndpointSlice{slice(ep("", "198.18.200.1", nil))}, 1},
		{"a pod in an IPv4 and an IPv6 slice counts once", []discoveryv1.EndpointSlice{
			slice(ep("a", "198.18.200.1", ptr.To(true))), slice(ep("a", "2001:db8::1", ptr.To(true)), ep("c", "2001:db8::3", ptr.To(true)))}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReadyEndpoints(tc.slices); got != tc.want {
				t.Errorf("ReadyEndpoints = %d, want %d", got, tc.want)
			}
		})
	}
}
