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
// weights become the fleet's traffic split, and the routes get a Gateway's status.
type Syncer struct {
	// Client reads ModelServers, pods and HTTPRoutes and writes route status.
	Client client.Client
	// Fleet is the simulated fleet.
	Fleet *fleet.Fleet
	// Pods says how pods become replicas.
	Pods PodOptions
	// Now is the clock.
	Now func() time.Time

	routed map[types.NamespacedName]bool
}

// Sync runs one pass and returns the ModelServers that have a route (they receive the load),
// sorted. Errors on route status writes are joined after the pass completes.
func (s *Syncer) Sync(ctx context.Context) ([]types.NamespacedName, error) {
	now := s.Now()
	var servers v1alpha1.ModelServerList
	if err := s.Client.List(ctx, &servers); err != nil {
		return nil, fmt.Errorf("listing ModelServers: %w", err)
	}
	known := map[types.NamespacedName]bool{}
	for _, ms := range servers.Items {
		known[types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}] = true
	}

	var pods corev1.PodList
	if err := s.Client.List(ctx, &pods); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	present := map[string]bool{}
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
	var errs []error
	for i := range routes.Items {
		route := &routes.Items[i]
		ws := RouteWeights(ExpandTraefikServices(route, traefik), known, targets, services)
		if len(ws) == 0 {
			continue
		}
		for k, w := range ws {
			if _, seen := weights[k]; !seen {
				weights[k] = w
			}
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

	errs = append(errs, s.syncPools(ctx, pools, targets, routes.Items, metav1.NewTime(now))...)
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
		s.Fleet.SetWeights(k.Namespace, k.Name, w)
		s.routed[k] = true
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
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
