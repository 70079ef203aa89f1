package fleetsim

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/test/framework/fleet"
)

// Syncer mirrors the cluster into the fleet: ModelServers' pods become replicas, HTTPRoute
// weights become the fleet's traffic split, and the routes get a Gateway's status. With
// RealGateway, a real Gateway does the last two: the Syncer only reads where each routed
// ModelServer's requests go (Targets). With Servers, every replica is also served on its
// pod's own address.
type Syncer struct {
	// Client reads ModelServers, pods and HTTPRoutes and writes route status.
	Client client.Client
	// Fleet is the simulated fleet.
	Fleet *fleet.Fleet
	// Pods says how pods become replicas.
	Pods PodOptions
	// Now is the clock.
	Now func() time.Time
	// RealGateway: a real Gateway routes the requests and writes the routes' and pools'
	// status; Sync sets no weights in the fleet and writes no status.
	RealGateway bool
	// Servers, when set, serve each replica on its pod's IP and port (PodEndpointOf, the port
	// of a ModelServer's pods being its spec.port).
	Servers *PodServers

	routed  map[types.NamespacedName]bool
	targets []Target
}

// Target is where the requests of a routed ModelServer go through a Gateway: the route's
// hostname, path and header matches of the first rule that references the ModelServer.
type Target struct {
	// ModelServer the requests are for.
	ModelServer types.NamespacedName
	// Route that routes them.
	Route types.NamespacedName
	// Host is the Host header: the route's first hostname (a wildcard's "*" made "sim"), ""
	// when the route has none.
	Host string
	// Path of the requests: /v1/completions (or /v1/chat/completions) when the rule's first
	// path match is a prefix of it, else that prefix followed by /v1/completions; an Exact
	// match as it is.
	Path string
	// Headers the rule's first match requires (Exact matches).
	Headers map[string]string
	// Model is the model name sent in requests (the ModelServer's name).
	Model string
}

// Targets returns the routed ModelServers' targets of the last Sync, sorted by ModelServer.
func (s *Syncer) Targets() []Target { return append([]Target(nil), s.targets...) }

// Sync runs one pass and returns the ModelServers that have a route (they receive the load),
// sorted. Errors on route status writes and pod server binds are joined after the pass
// completes.
func (s *Syncer) Sync(ctx context.Context) ([]types.NamespacedName, error) {
	now := s.Now()
	var servers v1alpha1.ModelServerList
	if err := s.Client.List(ctx, &servers); err != nil {
		return nil, fmt.Errorf("listing ModelServers: %w", err)
	}
	known := map[types.NamespacedName]bool{}
	ports := map[types.NamespacedName]int32{}
	for _, ms := range servers.Items {
		known[types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}] = true
		ports[types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}] = ms.Spec.Port
	}

	var pods corev1.PodList
	if err := s.Client.List(ctx, &pods); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	present := map[string]bool{}
	var endpoints []PodEndpoint
	peerGroups := map[types.NamespacedName]string{} // namespace/group -> peer server
	for i := range pods.Items {
		pod := &pods.Items[i]
		if server, group := pod.Labels[LabelPeerServer], peerGroup(pod.Labels); server != "" && group != "" && pod.Labels[v1alpha1.LabelModelServer] == "" {
			peerGroups[types.NamespacedName{Namespace: pod.Namespace, Name: group}] = server
			known[types.NamespacedName{Namespace: pod.Namespace, Name: server}] = true
		}
		if p, ok := PodToReplica(pod, s.Pods, now); ok {
			s.Fleet.SetPod(p)
			present[p.Key()] = true
			port := int32(0)
			if pod.Labels[v1alpha1.LabelModelServer] != "" {
				port = ports[types.NamespacedName{Namespace: pod.Namespace, Name: p.ModelServer}]
			}
			if ep, ok := PodEndpointOf(pod, port); ok {
				endpoints = append(endpoints, ep)
			}
		}
	}
	services, err := peerServices(ctx, s.Client, peerGroups)
	if err != nil {
		return nil, err
	}
	for _, key := range s.Fleet.PodKeys() {
		if !present[key] {
			ns, name, _ := strings.Cut(key, "/")
			s.Fleet.DeletePod(ns, name)
		}
	}
	var errs []error
	if s.Servers != nil {
		if err := s.Servers.Sync(ctx, endpoints); err != nil {
			errs = append(errs, err)
		}
	}

	var routes gatewayv1.HTTPRouteList
	if err := s.Client.List(ctx, &routes); err != nil {
		return nil, fmt.Errorf("listing HTTPRoutes: %w", err)
	}
	sort.Slice(routes.Items, func(i, j int) bool {
		a, b := routes.Items[i], routes.Items[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	pools, targets, err := listPools(ctx, s.Client)
	if err != nil {
		return nil, fmt.Errorf("listing InferencePools: %w", err)
	}
	traefik, err := listTraefikServices(ctx, s.Client)
	if err != nil {
		return nil, err
	}
	weights := map[types.NamespacedName]map[string]int32{}
	routeTargets := map[types.NamespacedName]Target{}
	for i := range routes.Items {
		route := &routes.Items[i]
		expanded := ExpandTraefikServices(route, traefik)
		ws := RouteWeights(expanded, known, targets, services)
		if len(ws) == 0 {
			continue
		}
		for k, w := range ws {
			if _, seen := weights[k]; !seen {
				weights[k] = w
			}
		}
		for k, t := range RouteTargets(expanded, known, targets, services) {
			if _, seen := routeTargets[k]; !seen {
				routeTargets[k] = t
			}
		}
		if s.RealGateway {
			continue
		}
		st, changed := RouteStatus(route, metav1.NewTime(now))
		if !changed {
			continue
		}
		updated := route.DeepCopy()
		updated.Status = st
		if err := s.Client.Status().Update(ctx, updated); err != nil {
			errs = append(errs, fmt.Errorf("updating status of HTTPRoute %s/%s: %w", route.Namespace, route.Name, err))
		}
	}

	if !s.RealGateway {
		errs = append(errs, s.syncPools(ctx, pools, targets, routes.Items, metav1.NewTime(now))...)
	}
	refs := make([]fleet.PoolRef, 0, len(targets))
	for k, t := range targets {
		refs = append(refs, fleet.PoolRef{Namespace: k.Namespace, Name: k.Name, ModelServer: t.ModelServer.Name, Color: t.Color})
	}
	s.Fleet.SetPools(refs)

	if s.routed == nil {
		s.routed = map[types.NamespacedName]bool{}
	}
	for k := range s.routed {
		if _, ok := weights[k]; !ok {
			s.Fleet.SetWeights(k.Namespace, k.Name, nil)
			delete(s.routed, k)
		}
	}
	out := make([]types.NamespacedName, 0, len(weights))
	for k, w := range weights {
		if !s.RealGateway {
			s.Fleet.SetWeights(k.Namespace, k.Name, w)
			s.routed[k] = true
		}
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	s.targets = s.targets[:0]
	for _, k := range out {
		s.targets = append(s.targets, routeTargets[k])
	}
	if len(errs) > 0 {
		return out, joinErrors(errs)
	}
	return out, nil
}

// peerServices maps the Services that select one group of a peer's pods (by LabelPeerGroup and
// LabelPeerRevision) to that peer server and group. groups holds the groups that have pods; a Service of a group
// without pods (a canary scaled to zero) resolves to nothing, and the route's weight on it is
// not served.
func peerServices(ctx context.Context, c client.Client, groups map[types.NamespacedName]string) (map[types.NamespacedName]PoolTarget, error) {
	if len(groups) == 0 {
		return nil, nil
	}
	var list corev1.ServiceList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing Services: %w", err)
	}
	out := map[types.NamespacedName]PoolTarget{}
	for _, svc := range list.Items {
		group := peerGroup(svc.Spec.Selector)
		server, ok := groups[types.NamespacedName{Namespace: svc.Namespace, Name: group}]
		if group == "" || !ok {
			continue
		}
		out[types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}] = PoolTarget{
			ModelServer: types.NamespacedName{Namespace: svc.Namespace, Name: server}, Color: group}
	}
	return out, nil
}

// RouteTargets is where a route sends each ModelServer's requests (see Target): per ModelServer
// the first rule whose backendRefs reference it (as RouteWeights reads them, whatever the
// weights), but for the ModelServer's header rule (spec.rollout.headerRoute): the load
// generator stands for its users, who do not send the testers' header and follow the weights.
func RouteTargets(route *gatewayv1.HTTPRoute, modelServers map[types.NamespacedName]bool, pools, services map[types.NamespacedName]PoolTarget) map[types.NamespacedName]Target {
	out := map[types.NamespacedName]Target{}
	host := ""
	if len(route.Spec.Hostnames) > 0 {
		host = string(route.Spec.Hostnames[0])
		if rest, ok := strings.CutPrefix(host, "*"); ok {
			host = "sim" + rest
		}
	}
	for _, rule := range route.Spec.Rules {
		one := route.DeepCopy()
		one.Spec.Rules = []gatewayv1.HTTPRouteRule{rule}
		path, headers := "/v1/completions", map[string]string(nil)
		if len(rule.Matches) > 0 {
			m := rule.Matches[0]
			if m.Path != nil && m.Path.Value != nil {
				switch typ := ptrOr(m.Path.Type, gatewayv1.PathMatchPathPrefix); typ {
				case gatewayv1.PathMatchExact:
					path = *m.Path.Value
				case gatewayv1.PathMatchPathPrefix:
					path = prefixedPath(*m.Path.Value)
				}
			}
			for _, h := range m.Headers {
				if ptrOr(h.Type, gatewayv1.HeaderMatchExact) == gatewayv1.HeaderMatchExact {
					if headers == nil {
						headers = map[string]string{}
					}
					headers[string(h.Name)] = h.Value
				}
			}
		}
		for k := range RouteWeights(one, modelServers, pools, services) {
			if rule.Name != nil && string(*rule.Name) == (&v1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Name: k.Name}}).HeaderRuleName() {
				continue
			}
			if _, seen := out[k]; !seen {
				out[k] = Target{ModelServer: k, Route: types.NamespacedName{Namespace: route.Namespace, Name: route.Name},
					Host: host, Path: path, Headers: headers, Model: k.Name}
			}
		}
	}
	return out
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// prefixedPath is the path of a completion request under a PathPrefix match: the API's own path
// when the prefix is one of its prefixes ("/", "/v1", "/v1/chat"), else below the prefix.
func prefixedPath(prefix string) string {
	p := strings.TrimSuffix(prefix, "/")
	for _, api := range []string{"/v1/completions", "/v1/chat/completions"} {
		if p == "" || p == api || strings.HasPrefix(api, p+"/") {
			return api
		}
	}
	return p + "/v1/completions"
}
