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

	corev1 "k8s.io/api/core/v1"
)

// Prober checks one pod.
type Prober interface {
	// Probe returns nil when the pod answers the warm-up request with a 2xx status.
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

// NewHTTPProber returns a prober with a per-request timeout.
func NewHTTPProber(timeout time.Duration, urlTemplate string) *HTTPProber {
	return &HTTPProber{Client: &http.Client{Timeout: timeout}, URLTemplate: urlTemplate}
}

// URL is where the warm-up request for pod goes.
func (p *HTTPProber) URL(pod *corev1.Pod, port int32, path string) (string, error) {
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
	resp, err := p.Client.Do(req)
	if err != nil {
		return fmt.Errorf("warm-up of pod %s: %w", pod.Name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("warm-up of pod %s: GET %s answered %d", pod.Name, path, resp.StatusCode)
	}
	return nil
}
