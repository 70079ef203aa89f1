// Package chart tests charts/modelship: rendered by Helm's SDK with default and non-default
// values, linted, its values schema refusing bad values by name, its CRDs the generated ones,
// and its output applied to a real kube-apiserver, where the ServiceAccount's RBAC is checked.
package chart

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/modelship/modelship/internal/testenv"
)

const namespace = "modelship-system"

func chartDir() string { return filepath.Join(testenv.RepoRoot(), "charts", "modelship") }

func load(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir())
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return c
}

// render is `helm template modelship charts/modelship -n modelship-system` with vals.
func render(c *chart.Chart, vals map[string]any) (string, error) {
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = "modelship"
	install.Namespace = namespace
	install.Replace = true
	rel, err := install.Run(c, vals)
	if err != nil {
		return "", err
	}
	r, ok := rel.(*release.Release)
	if !ok {
		return "", fmt.Errorf("unexpected release type %T", rel)
	}
	return r.Manifest, nil
}

// objects splits a manifest into objects.
func objects(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(manifest, "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if len(u.Object) == 0 {
			continue
		}
		out = append(out, u)
	}
	return out
}

func find(objs []*unstructured.Unstructured, kind, ns, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name && o.GetNamespace() == ns {
			return o
		}
	}
	return nil
}

func kinds(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func controllerArgs(t *testing.T, d *unstructured.Unstructured) []string {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("%d containers, want the controller", len(cs))
	}
	args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
	return args
}

func TestDefaultsRunTwoLeaderElectedReplicasUnderTheRestrictedProfile(t *testing.T) {
	out, err := render(load(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, out)
	d := find(objs, "Deployment", namespace, "modelship")
	if d == nil {
		t.Fatalf("no Deployment in:\n%s", out)
	}
	if n, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "replicas"); fmt.Sprint(n) != "2" {
		t.Errorf("replicas %v, want 2", n)
	}
	args := controllerArgs(t, d)
	for _, want := range []string{"--leader-elect", "--metrics-bind-address=:8443", "--max-concurrent-reconciles=4", "--gpu-exporter-namespace=gpu-operator", "--query-policy=namespaced"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
	pod, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
	if v, _, _ := unstructured.NestedString(pod, "securityContext", "seccompProfile", "type"); v != "RuntimeDefault" {
		t.Errorf("pod seccompProfile %q, want RuntimeDefault", v)
	}
	if v, _, _ := unstructured.NestedBool(pod, "securityContext", "runAsNonRoot"); !v {
		t.Error("pod not runAsNonRoot")
	}
	c := pod["containers"].([]any)[0].(map[string]any)
	for field, want := range map[string]bool{"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false} {
		if v, found, _ := unstructured.NestedBool(c, "securityContext", field); !found || v != want {
			t.Errorf("container securityContext.%s = %v (set %v), want %v", field, v, found, want)
		}
	}
	for _, want := range []struct{ kind, ns, name string }{
		{"ClusterRole", "", "modelship-manager"}, {"ClusterRoleBinding", "", "modelship-manager"},
		{"Service", namespace, "modelship-metrics"}, {"PodDisruptionBudget", namespace, "modelship"},
		{"ServiceAccount", namespace, "modelship"},
	} {
		if find(objs, want.kind, want.ns, want.name) == nil {
			t.Errorf("no %s %s/%s", want.kind, want.ns, want.name)
		}
	}
	if roles := kinds(objs, "Role"); len(roles) != 1 || find(objs, "Role", namespace, "modelship-leader-election") == nil || len(kinds(objs, "ServiceMonitor")) != 0 {
		t.Errorf("cluster mode renders %d Roles (want the leader election one in %s only) or a ServiceMonitor nobody asked for", len(roles), namespace)
	}
}

// grantsLeases says whether an RBAC role object's rules allow anything on Leases.
func grantsLeases(t *testing.T, o *unstructured.Unstructured) bool {
	t.Helper()
	raw, _ := json.Marshal(o.Object)
	var r rbacv1.ClusterRole // a Role's rules read the same
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	for _, rule := range r.Rules {
		group := slices.Contains(rule.APIGroups, "coordination.k8s.io") || slices.Contains(rule.APIGroups, "*")
		res := slices.Contains(rule.Resources, "leases") || slices.Contains(rule.Resources, "*")
		if group && res && len(rule.Verbs) > 0 {
			return true
		}
	}
	return false
}

// The leader election Lease is the controller's own: no ClusterRole the chart or config/rbac
// ships grants Leases (a controller that may rewrite any namespace's Leases can take over other
// controllers' leader elections and kubelet heartbeats' namespace kube-node-lease); a Role in the
// controller's namespace does.
func TestNoClusterRoleGrantsLeases(t *testing.T) {
	sources := map[string][]*unstructured.Unstructured{}
	for mode, vals := range map[string]map[string]any{
		"the chart":                    nil,
		"the chart in namespaced mode": {"watchNamespaces": []any{"team-a", "team-b"}},
	} {
		out, err := render(load(t), vals)
		if err != nil {
			t.Fatal(err)
		}
		sources[mode] = objects(t, out)
	}
	for _, f := range []string{"role.yaml", "role_binding.yaml", "metrics_reader_role.yaml"} {
		raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", f))
		if err != nil {
			t.Fatal(err)
		}
		sources["config/rbac"] = append(sources["config/rbac"], objects(t, string(raw))...)
	}
	for source, objs := range sources {
		for _, o := range kinds(objs, "ClusterRole") {
			if grantsLeases(t, o) {
				t.Errorf("%s: ClusterRole %s grants leases", source, o.GetName())
			}
		}
		var leaseRoles []string
		for _, o := range kinds(objs, "Role") {
			if grantsLeases(t, o) {
				leaseRoles = append(leaseRoles, o.GetNamespace()+"/"+o.GetName())
			}
		}
		want := namespace + "/modelship-leader-election"
		if source == "config/rbac" {
			want = "modelship-system/modelship-manager"
		}
		if len(leaseRoles) != 1 || leaseRoles[0] != want {
			t.Errorf("%s: Roles granting leases %v, want %s only", source, leaseRoles, want)
		}
		name, ns := strings.Split(want, "/")[1], strings.Split(want, "/")[0]
		b := find(objs, "RoleBinding", ns, name)
		if b == nil {
			t.Errorf("%s: no RoleBinding %s binds the leader election Role", source, want)
		}
	}
}

func TestNamespacedModeGrantsRolesInTheWatchedNamespacesOnly(t *testing.T) {
	out, err := render(load(t), map[string]any{
		"watchNamespaces": []any{"team-a", "team-b"},
		"metrics":         map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
		"nodeSelector":    map[string]any{"node-role": "infra"},
		"extraArgs":       []any{"--autoscaling-signal-interval=15s"},
		"prometheus":      map[string]any{"tokenSecret": map[string]any{"name": "prom-token"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, out)
	for _, ns := range []string{"team-a", "team-b", namespace} {
		if find(objs, "Role", ns, "modelship-manager") == nil || find(objs, "RoleBinding", ns, "modelship-manager") == nil {
			t.Errorf("no Role and RoleBinding in %s", ns)
		}
	}
	if find(objs, "ClusterRole", "", "modelship-manager") != nil || find(objs, "ClusterRoleBinding", "", "modelship-manager") != nil {
		t.Error("namespaced mode still grants the manager's rules cluster-wide")
	}
	args := controllerArgs(t, find(objs, "Deployment", namespace, "modelship"))
	for _, want := range []string{"--watch-namespaces=team-a,team-b", "--autoscaling-signal-interval=15s",
		"--prometheus-bearer-token-file=/etc/modelship/prometheus-token/token"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
	if find(objs, "ServiceMonitor", namespace, "modelship-controller") == nil {
		t.Error("no ServiceMonitor with metrics.serviceMonitor.enabled")
	}
}

func TestBadValuesFailNamingTheValue(t *testing.T) {
	cases := []struct {
		vals map[string]any
		want []string
	}{
		{map[string]any{"replicaCount": "two"}, []string{"replicaCount"}},
		{map[string]any{"queryPolicy": "all"}, []string{"queryPolicy"}},
		{map[string]any{"replicas": 3}, []string{"replicas"}},
		{map[string]any{"watchNamespaces": []any{"Team_A"}}, []string{"watchNamespaces"}},
		{map[string]any{"prometheus": map[string]any{"url": "prometheus:9090"}}, []string{"prometheus", "url"}},
	}
	for _, c := range cases {
		_, err := render(load(t), c.vals)
		if err == nil {
			t.Errorf("%v: rendered, want a schema error", c.vals)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not name %s", c.vals, err, w)
			}
		}
	}
}

func TestChartLints(t *testing.T) {
	res := action.NewLint().Run([]string{chartDir()}, nil)
	for _, m := range res.Messages {
		if m.Severity >= 2 { // warnings and errors
			t.Errorf("lint: %s", m)
		}
	}
	for _, err := range res.Errors {
		t.Errorf("lint: %v", err)
	}
}

func TestChartCRDsAreTheGeneratedOnes(t *testing.T) {
	generated, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	if err != nil || len(generated) == 0 {
		t.Fatalf("no generated CRDs: %v", err)
	}
	for _, g := range generated {
		want, _ := os.ReadFile(g)
		got, err := os.ReadFile(filepath.Join(chartDir(), "crds", filepath.Base(g)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("charts/modelship/crds/%s differs from config/crd/bases (run make manifests): %v", filepath.Base(g), err)
		}
	}
}

func TestTheGrafanaDashboardShipsAsAConfigMapForTheSidecar(t *testing.T) {
	out, err := render(load(t), map[string]any{"grafanaDashboard": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatal(err)
	}
	cm := find(objects(t, out), "ConfigMap", namespace, "modelship-dashboard")
	if cm == nil {
		t.Fatal("no dashboard ConfigMap")
	}
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("labels %v, want grafana_dashboard=1", cm.GetLabels())
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", "modelship.json")
	var dash map[string]any
	if err := json.Unmarshal([]byte(data), &dash); err != nil || dash["uid"] != "modelship" {
		t.Errorf("the ConfigMap does not hold the dashboard JSON: %v", err)
	}
	want, _ := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "grafana", "modelship.json"))
	if strings.TrimSpace(data) != strings.TrimSpace(string(want)) {
		t.Error("the chart's dashboard differs from config/grafana/modelship.json (run make manifests)")
	}
}
