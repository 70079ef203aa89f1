package manager

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// MetricsServerOptions serves the controller's own /metrics at addr. Secure (the default) is
// HTTPS with a self-signed certificate unless one is mounted, and each request is
// authenticated with a TokenReview and authorized with a SubjectAccessReview for a GET of the
// /metrics non-resource URL (the modelship-metrics-reader ClusterRole grants it); plain HTTP
// to anyone is an opt-in (--metrics-secure=false).
func MetricsServerOptions(addr string, secure bool) metricsserver.Options {
	if !secure {
		return metricsserver.Options{BindAddress: addr}
	}
	return metricsserver.Options{BindAddress: addr, SecureServing: true, FilterProvider: filters.WithAuthenticationAndAuthorization}
}
