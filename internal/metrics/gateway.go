package metrics

import (
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// The gateway's view (v1alpha1.GatewayMetricsTraefik): Traefik v3's own metrics, read from its
// scrape target only (namespace="{{.GatewayNamespace}}"), so that a series a model server's pod
// writes under Traefik's names is never read. Its kubernetesgateway provider names the service
// of a Service backendRef "<namespace>-<service>-http-<port>" and the routers of an HTTPRoute
// "httproute-<namespace>-<route>-gw-<gateway namespace>-<gateway>-ep-<entry point>-<rule>-<hash>",
// each with the suffix "@kubernetesgateway". Scraped through a ServiceMonitor, Prometheus keeps
// the target's own service label and renames Traefik's to exported_service: the service
// queries read service, else exported_service.

// traefikService selects the requests Traefik sent to the color's Service (any port), with the
// label Traefik's service name is under and more matchers.
func traefikService(label, more string) string {
	return `traefik_service_requests_total{namespace="{{.GatewayNamespace}}",` + label +
		`=~"{{.Namespace}}-{{.Service}}-http-[0-9]+@kubernetesgateway"` + more + `}`
}

// traefikServiceIncrease is the increase over the window of the requests Traefik sent to the
// color's Service (matching more), under either label name (see above).
func traefikServiceIncrease(more string) string {
	return `(sum(increase(` + traefikService("service", more) + `[{{.Window}}])) or sum(increase(` +
		traefikService("exported_service", more) + `[{{.Window}}])))`
}

var (
	// TraefikErrorRatio is the share, 0..1, of the requests Traefik sent to the color's Service
	// over the window that it answered with a 5xx (the model server's and its own: 502, 504).
	// No 5xx is 0; no request at all is NoData (0/0 is NaN), never 0.
	TraefikErrorRatio = `(` + traefikServiceIncrease(`,code=~"5.."`) + ` or vector(0)) / ` + traefikServiceIncrease("")

	// TraefikRouteRequestRate is the requests per second arriving at the ModelServer's
	// HTTPRoute over the window, counted by Traefik's routers of the route (before any backend:
	// requests Traefik answers itself because no backend has a ready endpoint count too, so the
	// rate exists with no pod).
	TraefikRouteRequestRate = `sum(rate(traefik_router_requests_total{namespace="{{.GatewayNamespace}}",router=~"httproute-{{.Namespace}}-{{.Route}}-gw-.+@kubernetesgateway"}[{{.Window}}]))`
)

// MetricGatewayErrorRatio is the name of the gateway's error ratio in status.rollout.analysis.
const MetricGatewayErrorRatio = "gateway-error-ratio"

// GatewayMetrics are the analysis metrics spec.rollout.analysis.gateway adds: the gateway's
// error ratio per color, at most 0.05 (the presets' bound).
func GatewayMetrics(source v1alpha1.GatewayMetricsSource) []v1alpha1.AnalysisMetric {
	if source != v1alpha1.GatewayMetricsTraefik {
		return nil
	}
	return []v1alpha1.AnalysisMetric{{
		Name: MetricGatewayErrorRatio, Query: TraefikErrorRatio,
		Max: resource.NewMilliQuantity(vllmMaxErrorRatioMilli, resource.DecimalSI),
	}}
}

// GatewayRequestRate is the query of the autoscaling metric gateway: the request rate at the
// route, counted by source ("" is Traefik, the API's default).
func GatewayRequestRate(source v1alpha1.GatewayMetricsSource) string {
	if source == "" || source == v1alpha1.GatewayMetricsTraefik {
		return TraefikRouteRequestRate
	}
	return ""
}

// TraefikName is name as Traefik writes it in the names of routers and services: every run of
// characters other than letters and digits becomes one "-" (its provider.Normalize).
func TraefikName(name string) string {
	return strings.Join(strings.FieldsFunc(name, func(c rune) bool {
		return !unicode.IsLetter(c) && !unicode.IsNumber(c)
	}), "-")
}
