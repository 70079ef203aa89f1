package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/modelship/modelship/test/framework/gateway"
)

// FieldOwner is the server-side apply field manager of the objects devenv creates.
const FieldOwner = "modelship-devenv"

// Node labels, annotations and taints of the fake GPU nodes.
const (
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	// GPUResource is the extended resource of NVIDIA's device plugin.
	GPUResource corev1.ResourceName = "nvidia.com/gpu"
	// GPUProductLabel is the node label of NVIDIA's GPU feature discovery naming the GPU model.
	GPUProductLabel = "nvidia.com/gpu.product"
	// GPUTaintKey is the key of the NoSchedule taint on GPU nodes (value "present").
	GPUTaintKey = "nvidia.com/gpu"
)

var (
	crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	// GatewayClassGVR and GatewayGVR are the Gateway API resources of the demo objects.
	GatewayClassGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}
	// GatewayGVR is the Gateway API Gateway resource.
	GatewayGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}
)

// installCRDs applies the Gateway API standard channel, the InferencePool (both from their Go
// modules) and the modelship CRDs server-side and waits until every CRD is Established.
func (e *Env) installCRDs(ctx context.Context) error {
	dirs := []string{e.opts.GatewayAPICRDDir}
	if dirs[0] == "" {
		d, err := gatewayAPICRDDir(ctx, e.opts.RepoRoot)
		if err != nil {
			return fmt.Errorf("crds: %w", err)
		}
		dirs[0] = d
	}
	pools, err := inferencePoolCRD(ctx, e.opts.RepoRoot)
	if err != nil {
		return fmt.Errorf("crds: %w", err)
	}
	var files []string
	for i, d := range append(dirs, e.opts.CRDDirs...) {
		if i == 1 {
			files = append(files, pools) // after the Gateway API's, before modelship's
		}
		found, err := filepath.Glob(filepath.Join(d, "*.yaml"))
		if err != nil || len(found) == 0 {
			return fmt.Errorf("crds: no YAML in %s", d)
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	if len(e.opts.CRDDirs) == 0 {
		files = append(files, pools)
	}
	cfg := e.RESTConfig()
	// Peers' CRDs (KEDA's) carry OpenAPI formats the apiserver does not know and warns about on
	// every create; the warnings say nothing about this environment.
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("crds: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("crds: %w", err)
	}
	groups, err := restmapper.GetAPIGroupResources(disc)
	if err != nil {
		return fmt.Errorf("crds: discovery: %w", err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	var crds []string
	for _, f := range files {
		objs, err := readObjects(f)
		if err != nil {
			return fmt.Errorf("crds: %w", err)
		}
		for _, obj := range objs {
			if err := applyObject(ctx, dyn, mapper, obj); err != nil {
				return fmt.Errorf("crds: %s: %w", filepath.Base(f), err)
			}
			if obj.GroupVersionKind().GroupKind() == (schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}) {
				crds = append(crds, obj.GetName())
			}
		}
	}
	for _, name := range crds {
		err := waitFor(ctx, nil, "CRD "+name+" Established", e.opts.StartTimeout, func(ctx context.Context) error {
			u, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
			return errors.New("not Established yet")
		})
		if err != nil {
			return fmt.Errorf("crds: %w", err)
		}
	}
	return nil
}

// readObjects decodes every non-empty document of a YAML file.
func readObjects(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 64<<10)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decode %s: %w", path, err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// applyObject server-side applies obj (force: devenv owns what it installs).
func applyObject(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("map %s: %w", gvk, err)
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		ri = dyn.Resource(m.Resource).Namespace(ns)
	}
	if _, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldOwner, Force: true}); err != nil {
		return fmt.Errorf("apply %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	return nil
}

// GPUNodeName is the name of the i-th fake GPU node.
func GPUNodeName(i int) string { return "gpu-node-" + strconv.Itoa(i) }

// gpuNode is the fake GPU node i, with its capacity in status (kwok keeps it and adds the
// conditions, addresses and heartbeats).
func (o Options) gpuNode(i int) (*corev1.Node, error) {
	name := GPUNodeName(i)
	capacity := corev1.ResourceList{}
	for res, q := range map[corev1.ResourceName]string{
		GPUResource:                     strconv.Itoa(o.GPUsPerNode),
		corev1.ResourceCPU:              o.NodeCPU,
		corev1.ResourceMemory:           o.NodeMemory,
		corev1.ResourcePods:             o.NodePods,
		corev1.ResourceEphemeralStorage: "1Ti",
	} {
		qty, err := resource.ParseQuantity(q)
		if err != nil {
			return nil, fmt.Errorf("node %s: %s %q: %w", name, res, q, err)
		}
		capacity[res] = qty
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"type":                          "kwok",
				"kubernetes.io/hostname":        name,
				"kubernetes.io/os":              "linux",
				"kubernetes.io/arch":            "amd64",
				"kubernetes.io/role":            "agent",
				"node-role.kubernetes.io/agent": "",
				GPUProductLabel:                 o.GPUProduct,
				"nvidia.com/gpu.count":          strconv.Itoa(o.GPUsPerNode),
				"nvidia.com/gpu.present":        "true",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			NodeInfo:    corev1.NodeSystemInfo{KubeletVersion: "fake", OperatingSystem: "linux", Architecture: "amd64"},
			Phase:       corev1.NodeRunning,
		},
	}
	if !o.NoGPUTaint {
		n.Spec.Taints = []corev1.Taint{{Key: GPUTaintKey, Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	}
	return n, nil
}

// createNodes creates the fake GPU nodes and waits until kwok reports them Ready.
func (e *Env) createNodes(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(e.RESTConfig())
	if err != nil {
		return fmt.Errorf("gpu-nodes: %w", err)
	}
	for i := range e.opts.GPUNodes {
		n, err := e.opts.gpuNode(i)
		if err != nil {
			return fmt.Errorf("gpu-nodes: %w", err)
		}
		created, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{FieldManager: FieldOwner})
		if err != nil {
			return fmt.Errorf("gpu-nodes: create %s: %w", n.Name, err)
		}
		// The API server may drop status on create; put the capacity back if so.
		if _, ok := created.Status.Allocatable[GPUResource]; !ok {
			created.Status.Capacity, created.Status.Allocatable = n.Status.Capacity, n.Status.Allocatable
			if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: FieldOwner}); err != nil {
				return fmt.Errorf("gpu-nodes: set capacity of %s: %w", n.Name, err)
			}
		}
	}
	kwok := e.Process(PartKwok)
	err = waitFor(ctx, kwok, fmt.Sprintf("%d GPU nodes Ready", e.opts.GPUNodes), e.opts.StartTimeout, func(ctx context.Context) error {
		for i := range e.opts.GPUNodes {
			n, err := cs.CoreV1().Nodes().Get(ctx, GPUNodeName(i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !nodeReady(n) {
				return fmt.Errorf("node %s not Ready yet", n.Name)
			}
			if q := n.Status.Allocatable[GPUResource]; q.Value() != int64(e.opts.GPUsPerNode) {
				return fmt.Errorf("node %s has %s allocatable %s, want %d", n.Name, GPUResource, q.String(), e.opts.GPUsPerNode)
			}
		}
		return nil
	})
	if err != nil {
		return partError(kwok, err)
	}
	return nil
}

// retryable marks API errors that no retry fixes (invalid, forbidden, bad request) as permanent.
func retryable(err error) error {
	if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) {
		return permanent(err)
	}
	return err
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// startGateway applies the demo GatewayClass (Traefik's controllerName) and Gateway (one HTTP
// listener on the port of Traefik's web entry point, routes from every namespace), starts
// Traefik with test/framework/gateway's options (its log in <Dir>/traefik.log) and waits until
// it answers /ping and the Gateway is Programmed.
func (e *Env) startGateway(ctx context.Context) error {
	web, err := freePort()
	if err != nil {
		return err
	}
	admin, err := freePort()
	if err != nil {
		return err
	}
	if err := e.createGateway(ctx, web); err != nil {
		return err
	}
	if e.opts.NoTraefik {
		return nil
	}
	bin := e.opts.TraefikBinary
	if bin == "" {
		if bin, err = gateway.FindBinary(); err != nil {
			return fmt.Errorf("traefik: %w", err)
		}
	}
	opts := gateway.Options{Binary: bin, Kubeconfig: e.kubeconfig, Dir: e.opts.Dir, WebPort: web, AdminPort: admin, LogToStdout: true,
		KubernetesCRD: e.opts.TraefikKubernetesCRD}
	p, err := e.launchEnv(PartTraefik, append([]string{bin}, opts.Args()...), []string{"KUBECONFIG=" + e.kubeconfig})
	if err != nil {
		return fmt.Errorf("traefik: %w", err)
	}
	e.gatewayURL = "http://127.0.0.1:" + strconv.Itoa(web)
	e.traefikURL = "http://127.0.0.1:" + strconv.Itoa(admin)
	if err := waitFor(ctx, p, "traefik /ping", e.opts.StartTimeout, httpGetOK(e.traefikURL+"/ping", "", nil)); err != nil {
		return partError(p, err)
	}
	dyn, err := dynamic.NewForConfig(e.RESTConfig())
	if err != nil {
		return fmt.Errorf("traefik: %w", err)
	}
	what := fmt.Sprintf("Gateway %s/%s Programmed", e.opts.GatewayNamespace, e.opts.GatewayName)
	err = waitFor(ctx, p, what, e.opts.StartTimeout, func(ctx context.Context) error {
		u, err := dyn.Resource(GatewayGVR).Namespace(e.opts.GatewayNamespace).Get(ctx, e.opts.GatewayName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Programmed" {
				if m["status"] == "True" {
					return nil
				}
				return fmt.Errorf("programmed %v: %v: %v", m["status"], m["reason"], m["message"])
			}
		}
		return errors.New("no Programmed condition yet")
	})
	if err != nil {
		return partError(p, err)
	}
	return nil
}

// createGateway applies the demo GatewayClass and Gateway, its HTTP listener on port.
func (e *Env) createGateway(ctx context.Context, port int) error {
	dyn, err := dynamic.NewForConfig(e.RESTConfig())
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	gc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       "GatewayClass",
		"metadata":   map[string]any{"name": e.opts.GatewayClassName},
		"spec": map[string]any{
			"controllerName": e.opts.GatewayControllerName,
			"description":    "Traefik " + gateway.Version + ", run by modelship's devenv",
		},
	}}
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       "Gateway",
		"metadata":   map[string]any{"name": e.opts.GatewayName, "namespace": e.opts.GatewayNamespace},
		"spec": map[string]any{
			"gatewayClassName": e.opts.GatewayClassName,
			"listeners": []any{map[string]any{
				"name":     "http",
				"protocol": "HTTP",
				// Traefik attaches a listener to the entry point of the same port.
				"port":          int64(port),
				"allowedRoutes": map[string]any{"namespaces": map[string]any{"from": "All"}},
			}},
		},
	}}
	// The CRDs were just established; discovery of their resources can lag a moment.
	err = waitFor(ctx, nil, "GatewayClass and Gateway applied", 30*time.Second, func(ctx context.Context) error {
		opts := metav1.ApplyOptions{FieldManager: FieldOwner, Force: true}
		if _, err := dyn.Resource(GatewayClassGVR).Apply(ctx, gc.GetName(), gc, opts); err != nil {
			return retryable(fmt.Errorf("apply GatewayClass %s: %w", gc.GetName(), err))
		}
		if _, err := dyn.Resource(GatewayGVR).Namespace(gw.GetNamespace()).Apply(ctx, gw.GetName(), gw, opts); err != nil {
			return retryable(fmt.Errorf("apply Gateway %s/%s: %w", gw.GetNamespace(), gw.GetName(), err))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}
