package gateway

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// PortName is the name of the Services' and EndpointSlices' port. Traefik v3.6.12 matches a
// Service port to an EndpointSlice port by name (and dereferences the slice's name), so a
// hand-written EndpointSlice must set it.
const PortName = "http"

// Class is a GatewayClass Traefik serves.
func Class(name string) *gatewayv1.GatewayClass {
	return &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: ControllerName},
	}
}

// Gateway is a Gateway of class with one HTTP listener on port (Traefik attaches it to the
// entry point that binds that port) accepting routes from its namespace.
func Gateway(namespace, name, class string, port int) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(class),
			Listeners: []gatewayv1.Listener{{
				Name:     "http",
				Port:     gatewayv1.PortNumber(port),
				Protocol: gatewayv1.HTTPProtocolType,
			}},
		},
	}
}

// Service is a Service without selector (its EndpointSlices are written by hand, as the fleet
// simulator will for the pods it serves) with one port named PortName.
func Service(namespace, name string, port, targetPort int) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{
				Name: PortName, Port: int32(port), TargetPort: intstr.FromInt32(int32(targetPort)), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

// EndpointSlice is the EndpointSlice of Service service: one endpoint per address, all on
// port, ready or not.
func EndpointSlice(namespace, service string, port int, ready bool, addresses ...string) *discoveryv1.EndpointSlice {
	eps := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: service,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: service,
				discoveryv1.LabelManagedBy:   "modelship-test",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(PortName), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, a := range addresses {
		eps.Endpoints = append(eps.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{a},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(ready), Terminating: ptr.To(false)},
		})
	}
	return eps
}

// Backend is one weighted backendRef of a route: a Service, its port and weight.
type Backend struct {
	Service string
	Port    int
	Weight  int32
}

// HTTPRoute is a route attached to gateway, matching the path prefix, splitting between the
// backends by weight: the shape of the routes modelship writes.
func HTTPRoute(namespace, name, gateway, pathPrefix string, backends ...Backend) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(gateway)}}},
			Rules: []gatewayv1.HTTPRouteRule{{
				Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
					Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To(pathPrefix),
				}}},
			}},
		},
	}
	SetWeights(r, backends...)
	return r
}

// SetWeights replaces the route's first rule's backendRefs.
func SetWeights(r *gatewayv1.HTTPRoute, backends ...Backend) {
	refs := make([]gatewayv1.HTTPBackendRef, 0, len(backends))
	for _, b := range backends {
		refs = append(refs, gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{
			BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: gatewayv1.ObjectName(b.Service), Port: ptr.To(gatewayv1.PortNumber(b.Port)),
			},
			Weight: ptr.To(b.Weight),
		}})
	}
	r.Spec.Rules[0].BackendRefs = refs
}

// RouteCondition is the route's condition of type cond for its first parent, if reported for
// the route's current generation.
func RouteCondition(r *gatewayv1.HTTPRoute, cond string) *metav1.Condition {
	for _, p := range r.Status.Parents {
		if p.ControllerName != ControllerName {
			continue
		}
		c := meta.FindStatusCondition(p.Conditions, cond)
		if c != nil && c.ObservedGeneration == r.Generation {
			return c
		}
	}
	return nil
}

// WaitFor polls get and check every 50 ms until check returns nil, the context ends or timeout
// passes; the error then is check's last one.
func WaitFor(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %s: %w", timeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitGatewayProgrammed waits for the Gateway's Programmed condition to be True.
func WaitGatewayProgrammed(ctx context.Context, c client.Client, namespace, name string, timeout time.Duration) error {
	return WaitFor(ctx, timeout, func(ctx context.Context) error {
		var gw gatewayv1.Gateway
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &gw); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(gw.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed))
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != gw.Generation {
			return fmt.Errorf("gateway %s/%s not Programmed: %+v", namespace, name, gw.Status.Conditions)
		}
		return nil
	})
}

// WaitRoute waits for the route's conditions for its current generation to hold the wanted
// statuses (e.g. Accepted: True) and returns the route as last read.
func WaitRoute(ctx context.Context, c client.Client, namespace, name string, timeout time.Duration, want map[string]metav1.ConditionStatus) (*gatewayv1.HTTPRoute, error) {
	var r gatewayv1.HTTPRoute
	err := WaitFor(ctx, timeout, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &r); err != nil {
			return err
		}
		for typ, st := range want {
			cond := RouteCondition(&r, typ)
			if cond == nil || cond.Status != st {
				return fmt.Errorf("route %s/%s: %s is not %s: %+v", namespace, name, typ, st, r.Status.Parents)
			}
		}
		return nil
	})
	return &r, err
}
