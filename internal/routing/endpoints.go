package routing

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// ReadyEndpoints counts the ready endpoints that a Service's EndpointSlices list: what a Gateway
// routes that Service's share of requests to (Traefik v3.6.12 answers a Service whose slices
// hold no ready endpoint with HTTP 503). An endpoint is ready when its ready condition is true
// or unset (the EndpointSlice API reads nil as ready); an endpoint listed in several slices (one
// per address type) counts once, by the pod it targets or else by its first address.
func ReadyEndpoints(slices []discoveryv1.EndpointSlice) int32 {
	seen := map[string]bool{}
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if !ptr.Deref(e.Conditions.Ready, true) {
				continue
			}
			key := ""
			switch {
			case e.TargetRef != nil && e.TargetRef.Name != "":
				key = "pod/" + e.TargetRef.Namespace + "/" + e.TargetRef.Name
			case len(e.Addresses) > 0:
				key = "addr/" + e.Addresses[0]
			default:
				continue
			}
			seen[key] = true
		}
	}
	return int32(len(seen))
}
