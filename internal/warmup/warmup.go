// Package warmup checks that a model server pod really serves before it gets traffic: vLLM
// reports healthy before its weights are loaded, while /v1/models answers only once they are.
package warmup

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Prober checks one pod.
type Prober interface {
	// Probe returns nil when the pod answers the warm-up request with a 2xx status. A redirect
	// is not followed and is not warm; a pod on the host network is refused.
	Probe(ctx context.Context, pod *corev1.Pod, port int32, path string) error
}

// HTTPProber sends an HTTP GET to the pod. URLTemplate, when set, replaces the pod's address:
// "{namespace}", "{pod}", "{port}" and "{path}" are substituted (for a local environment where
// pod IPs are not reachable and a simulator answers for them); otherwise
// http://<podIP>:<port><path> is used.
type HTTPProber struct {
	Client      *http.Client
	URLTemplate string
}

// NewHTTPProber returns a prober with a per-request timeout that never follows a redirect: a
// tenant's pod could otherwise send the controller to the cloud metadata endpoint or to any
// in-cluster service.
func NewHTTPProber(timeout time.Duration, urlTemplate string) *HTTPProber {
	return &HTTPProber{Client: NewClient(timeout), URLTemplate: urlTemplate}
}

// NewClient is the HTTP client of every call the controller makes to an address that a tenant
// or a cluster's configuration names (warm-up checks, notification webhooks): a timeout per
// request, and a redirect is an answer, never followed, so that the address named is the only
// one called.
func NewClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, CheckRedirect: noRedirect}
}

// noRedirect stops a client at the first response: a redirect is an answer, not a warm pod.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// OwnedBy reports whether pod is controlled by rs and rs by the Deployment d: only such pods
// are probed, so that a pod a tenant created with the right labels cannot point the controller
// at an address of its choosing. rs is the ReplicaSet the pod's controller reference names (nil
// when it has none or it is not found).
func OwnedBy(pod *corev1.Pod, rs *appsv1.ReplicaSet, d *appsv1.Deployment) bool {
	if pod == nil || rs == nil || d == nil {
		return false
	}
	pc := metav1.GetControllerOf(pod)
	if pc == nil || pc.Kind != "ReplicaSet" || pc.UID != rs.UID || pc.Name != rs.Name || rs.Namespace != pod.Namespace {
		return false
	}
	rc := metav1.GetControllerOf(rs)
	return rc != nil && rc.Kind == "Deployment" && rc.UID == d.UID && rc.Name == d.Name && d.Namespace == rs.Namespace
}

// URL is where the warm-up request for pod goes.
func (p *HTTPProber) URL(pod *corev1.Pod, port int32, path string) (string, error) {
	if pod.Spec.HostNetwork {
		return "", fmt.Errorf("pod %s/%s uses the host network: its IP is the node's, not probed", pod.Namespace, pod.Name)
	}
	if p.URLTemplate != "" {
		return strings.NewReplacer("{namespace}", pod.Namespace, "{pod}", pod.Name,
			"{port}", strconv.Itoa(int(port)), "{path}", strings.TrimPrefix(path, "/")).Replace(p.URLTemplate), nil
	}
	if pod.Status.PodIP == "" {
		return "", fmt.Errorf("pod %s/%s has no IP yet", pod.Namespace, pod.Name)
	}
	return "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port))) + path, nil
}

// Probe implements Prober.
func (p *HTTPProber) Probe(ctx context.Context, pod *corev1.Pod, port int32, path string) error {
	u, err := p.URL(pod, port, path)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("warm-up request for pod %s: %w", pod.Name, err)
	}
	c := p.Client
	if c == nil {
		c = &http.Client{Timeout: 3 * time.Second}
	}
	if c.CheckRedirect == nil {
		cc := *c
		cc.CheckRedirect = noRedirect
		c = &cc
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("warm-up of pod %s: %w", pod.Name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		return fmt.Errorf("warm-up of pod %s: GET %s answered a redirect (%d), not followed", pod.Name, path, resp.StatusCode)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("warm-up of pod %s: GET %s answered %d", pod.Name, path, resp.StatusCode)
	}
	return nil
}
