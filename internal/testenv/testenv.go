// Package testenv starts a real kube-apiserver and etcd (envtest) with modelship's and the
// Gateway API's CRDs installed, for integration tests. The binaries come from
// KUBEBUILDER_ASSETS, which `make test` sets (hack/controlplane.sh builds them once).
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Scheme knows the core types, the Gateway API, the InferencePool and modelship's API.
func Scheme() *apiruntime.Scheme {
	s := apiruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(gatewayv1.Install(s))
	utilruntime.Must(inferencev1.Install(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// RepoRoot is the checkout's top folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// GatewayAPICRDs is the standard channel CRD folder of the sigs.k8s.io/gateway-api module in
// go.mod, from GATEWAY_API_CRDS or `go list`.
func GatewayAPICRDs() (string, error) {
	if d := os.Getenv("GATEWAY_API_CRDS"); d != "" {
		return d, nil
	}
	dir, err := moduleDir("sigs.k8s.io/gateway-api")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "config", "crd", "standard"), nil
}

// InferencePoolCRDs is the InferencePool (inference.networking.k8s.io/v1) CRD file of the
// sigs.k8s.io/gateway-api-inference-extension module in go.mod, whose API types modelship uses.
func InferencePoolCRDs() (string, error) {
	dir, err := moduleDir("sigs.k8s.io/gateway-api-inference-extension")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "config", "crd", "bases", "inference.networking.k8s.io_inferencepools.yaml"), nil
}

// moduleDir is the folder of a module that go.mod requires, from `go list`.
func moduleDir(module string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module) //nolint:noctx // a short lookup at test start
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("finding the %s module: %w", module, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Available reports whether the control plane binaries are there, and why not.
func Available() (bool, string) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		return false, "KUBEBUILDER_ASSETS is not set: run the tests with `make test`, which builds or reuses kube-apiserver and etcd"
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return false, fmt.Sprintf("%s missing in KUBEBUILDER_ASSETS=%s", b, dir)
		}
	}
	return true, ""
}

// Start starts the API server with modelship's and the Gateway API's CRDs installed, and the
// CRD folders or files of extra. Call Stop on the returned environment.
func Start(extra ...string) (*envtest.Environment, *rest.Config, error) {
	gw, err := GatewayAPICRDs()
	if err != nil {
		return nil, nil, err
	}
	env := &envtest.Environment{
		CRDInstallOptions: envtest.CRDInstallOptions{
			Paths:              append([]string{filepath.Join(RepoRoot(), "config", "crd", "bases"), gw}, extra...),
			ErrorIfPathMissing: true,
			Scheme:             Scheme(),
		},
	}
	cfg, err := env.Start()
	if err != nil {
		// envtest leaves etcd and kube-apiserver running when a later step (installing the
		// CRDs) fails: stop them, or every failed start leaks two processes.
		if stopErr := env.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, nil, fmt.Errorf("starting envtest: %w", err)
	}
	return env, cfg, nil
}
