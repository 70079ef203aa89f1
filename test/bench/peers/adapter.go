package peers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/modelship/modelship/test/framework/devenv"
)

// Names of what StartKEDAAdapter registers in the cluster, as KEDA's own manifests name them.
const (
	// KEDANamespace is the namespace of KEDA's objects.
	KEDANamespace = "keda"
	// KEDAMetricsService is the Service in KEDANamespace that fronts the adapter.
	KEDAMetricsService = "keda-metrics-apiserver"
	// ExternalMetricsAPIService is the APIService the adapter serves.
	ExternalMetricsAPIService = "v1beta1.external.metrics.k8s.io"
)

var (
	gvrNamespace     = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	gvrService       = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	gvrEndpointSlice = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
	gvrAPIService    = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
)

// fieldManager owns what this package applies to the cluster.
const fieldManager = "modelship-peers"

// KEDAAdapterOptions tunes StartKEDAAdapter. The zero value is fine.
type KEDAAdapterOptions struct {
	// Address is the IP address the adapter serves on; it must not be a loopback address (the
	// API server refuses those in EndpointSlices). Defaults to an address AddHostAddress adds to
	// lo, removed again when env stops.
	Address net.IP
	// Timeout bounds the wait for the APIService to become Available, once the adapter answers
	// its /healthz (waited for up to 2 minutes, as for every peer). Defaults to 2 minutes.
	Timeout time.Duration
	// LogLevel is the adapter's --zap-log-level (debug, info, error or a number). Defaults to
	// "info".
	LogLevel string
}

// KEDAAdapter is KEDA's running metrics adapter, serving external.metrics.k8s.io through the
// aggregator of kube-apiserver.
type KEDAAdapter struct {
	// Peer is the adapter process; Health is its /healthz on Address, Ready the time from start
	// to a healthy answer.
	*Peer
	// Address is where the adapter serves (host:port, host being its own address).
	Address string
	// Available is the time from start until the APIService was Available (it includes Ready).
	Available time.Duration
}

// StartKEDAAdapter runs KEDA's metrics adapter against env, beside the operator StartKEDA
// started (it asks operator's gRPC metrics service for values), and registers it with the
// aggregator: namespace keda, the Service keda/keda-metrics-apiserver with an EndpointSlice
// pointing at the adapter's address, and the APIService v1beta1.external.metrics.k8s.io, whose
// caBundle is the adapter's self-signed serving certificate. It returns once the APIService is
// Available, so that the HPA controller can read KEDA's metrics. Env.Stop stops the adapter and
// removes the address it added to the host.
func StartKEDAAdapter(ctx context.Context, env *devenv.Env, operator *Peer, opts KEDAAdapterOptions) (*KEDAAdapter, error) {
	if operator == nil || operator.MetricsService == "" || operator.CertDir == "" {
		return nil, errors.New("keda-adapter: the operator's metrics service is unknown: start it with StartKEDA")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "info"
	}
	ip := opts.Address
	if ip == nil {
		added, remove, err := AddHostAddress(ctx)
		if err != nil {
			return nil, fmt.Errorf("keda-adapter: %w", err)
		}
		env.OnStop(func() { _ = remove() })
		ip = added
	}
	if ip.IsLoopback() {
		return nil, fmt.Errorf("keda-adapter: address %s is a loopback address, which the API server refuses as an endpoint", ip)
	}
	securePort, err := devenv.FreePort()
	if err != nil {
		return nil, err
	}
	metricsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	// The serving certificate: the aggregator checks it against the caBundle and the name
	// <service>.<namespace>.svc; a client on this machine dials the address.
	serving := filepath.Join(env.Dir(), "keda-adapter-certs")
	caBundle, err := writeSelfSigned(serving, []net.IP{ip}, []string{KEDAMetricsService + "." + KEDANamespace + ".svc"})
	if err != nil {
		return nil, fmt.Errorf("keda-adapter: %w", err)
	}
	kc := env.Kubeconfig()
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(securePort))

	began := time.Now()
	p, err := env.StartProcess("keda-adapter", []string{filepath.Join(Dir(), "keda-"+KEDAVersion, "keda-adapter"),
		"--bind-address=" + ip.String(),
		"--secure-port=" + strconv.Itoa(securePort),
		"--tls-cert-file=" + filepath.Join(serving, "tls.crt"),
		"--tls-private-key-file=" + filepath.Join(serving, "tls.key"),
		// --cert-dir is also where the adapter finds the certificates of its gRPC link to the
		// operator (ca.crt, tls.crt, tls.key).
		"--cert-dir=" + operator.CertDir,
		"--metrics-service-address=" + operator.MetricsService,
		// As in KEDA's manifests. Without a client CA of its own the adapter complains every few
		// seconds that kube-system/extension-apiserver-authentication has none (this API server
		// authenticates with tokens, not client certificates).
		"--client-ca-file=" + filepath.Join(operator.CertDir, "ca.crt"),
		"--lister-kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		// Its own /metrics listens on all interfaces; a free port keeps it off 8080.
		"--port=" + metricsPort,
		"--zap-log-level=" + opts.LogLevel,
	}, []string{"WATCH_NAMESPACE=", "POD_NAMESPACE=" + KEDANamespace, "KEDA_CLUSTER_OBJECT_NAMESPACE=" + KEDANamespace})
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caBundle)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	a := &KEDAAdapter{Peer: &Peer{Process: p, Health: "https://" + addr + "/healthz"}, Address: addr}
	if err := waitHealthy(ctx, a.Peer, began, client); err != nil {
		return nil, err
	}

	dyn, err := dynamic.NewForConfig(env.RESTConfig())
	if err != nil {
		return nil, err
	}
	for _, o := range []struct {
		gvr schema.GroupVersionResource
		obj *unstructured.Unstructured
	}{
		{gvrNamespace, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": KEDANamespace}}}},
		{gvrService, adapterService()},
		{gvrEndpointSlice, adapterEndpointSlice(ip, securePort)},
		{gvrAPIService, externalMetricsAPIService(caBundle)},
	} {
		ri := dynamic.ResourceInterface(dyn.Resource(o.gvr))
		if ns := o.obj.GetNamespace(); ns != "" {
			ri = dyn.Resource(o.gvr).Namespace(ns)
		}
		if _, err := ri.Apply(ctx, o.obj.GetName(), o.obj, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return nil, fmt.Errorf("keda-adapter: apply %s %s: %w", o.obj.GetKind(), o.obj.GetName(), err)
		}
	}
	if err := waitAPIServiceAvailable(ctx, dyn, p, opts.Timeout); err != nil {
		return nil, err
	}
	a.Available = time.Since(began)
	return a, nil
}

// adapterService is the Service in front of the adapter: without a selector, its endpoints
// are the EndpointSlice of adapterEndpointSlice.
func adapterService() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": KEDAMetricsService, "namespace": KEDANamespace},
		"spec": map[string]any{
			"type":  "ClusterIP",
			"ports": []any{map[string]any{"name": "https", "port": int64(443), "protocol": "TCP"}},
		},
	}}
}

// adapterEndpointSlice points the Service at the adapter's address and port. The aggregator
// dials it directly (kube-apiserver runs with --enable-aggregator-routing).
func adapterEndpointSlice(ip net.IP, port int) *unstructured.Unstructured {
	family := "IPv4"
	if ip.To4() == nil {
		family = "IPv6"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
		"metadata": map[string]any{
			"name": KEDAMetricsService, "namespace": KEDANamespace,
			"labels": map[string]any{
				"kubernetes.io/service-name":             KEDAMetricsService,
				"endpointslice.kubernetes.io/managed-by": fieldManager,
			},
		},
		"addressType": family,
		"endpoints": []any{map[string]any{
			"addresses":  []any{ip.String()},
			"conditions": map[string]any{"ready": true},
		}},
		"ports": []any{map[string]any{"name": "https", "port": int64(port), "protocol": "TCP"}},
	}}
}

// externalMetricsAPIService registers the adapter as the server of external.metrics.k8s.io.
func externalMetricsAPIService(caBundle []byte) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": ExternalMetricsAPIService},
		"spec": map[string]any{
			"group":                "external.metrics.k8s.io",
			"version":              "v1beta1",
			"groupPriorityMinimum": int64(100),
			"versionPriority":      int64(100),
			"caBundle":             base64.StdEncoding.EncodeToString(caBundle),
			"service": map[string]any{
				"name": KEDAMetricsService, "namespace": KEDANamespace, "port": int64(443),
			},
		},
	}}
}

// waitAPIServiceAvailable waits for the condition Available=True of the external metrics
// APIService; on timeout the error gives the condition's last reason and message and names
// the adapter's log.
func waitAPIServiceAvailable(ctx context.Context, dyn dynamic.Interface, adapter *devenv.Process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := "no status yet"
	for {
		obj, err := dyn.Resource(gvrAPIService).Get(ctx, ExternalMetricsAPIService, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
		} else {
			conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] != "Available" {
					continue
				}
				if m["status"] == "True" {
					return nil
				}
				last = fmt.Sprintf("Available=%v (%v): %v", m["status"], m["reason"], m["message"])
			}
		}
		if !adapter.Running() {
			return fmt.Errorf("keda-adapter exited; see %s", adapter.LogPath())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("APIService %s not Available within %s: %s; see %s", ExternalMetricsAPIService, timeout, last, adapter.LogPath())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
