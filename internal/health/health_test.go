package health

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/plan"
)

// fixture is a ModelServer as the controller leaves it, and what each reader must make of it.
type fixture struct {
	name   string
	ms     *v1alpha1.ModelServer
	kstat  status.Status
	argo   string
	done   bool
	code   int
	phases []v1alpha1.Phase // phases this case covers, to check that every phase is covered
}

type msOption func(*v1alpha1.ModelServer)

// newModelServer builds a ModelServer at generation 3, observed, in phase with the conditions
// of the package's table.
func newModelServer(phase v1alpha1.Phase, opts ...msOption) *v1alpha1.ModelServer {
	ms := &v1alpha1.ModelServer{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ModelServer"},
		ObjectMeta: metav1.ObjectMeta{Name: "llama", Namespace: "ml", Generation: 3},
		Spec:       v1alpha1.ModelServerSpec{Rollout: v1alpha1.RolloutSpec{Steps: []int32{10, 50, 100}}},
		Status: v1alpha1.ModelServerStatus{
			ObservedGeneration: 3,
			Phase:              phase,
			Revision:           "rev-b",
			Stable:             &v1alpha1.ColorStatus{Color: v1alpha1.Blue, Revision: "rev-a"},
			Conditions:         plan.PhaseConditions(phase, 3),
		},
	}
	switch phase {
	case v1alpha1.PhaseProgressing, v1alpha1.PhasePaused, v1alpha1.PhaseAwaitingPromotion:
		ms.Status.Candidate = &v1alpha1.ColorStatus{Color: v1alpha1.Green, Revision: "rev-b"}
		ms.Status.Rollout.Step = 2
		ms.Status.Weights = v1alpha1.Weights{Stable: 50, Candidate: 50}
	case v1alpha1.PhaseHealthy:
		ms.Status.Stable = &v1alpha1.ColorStatus{Color: v1alpha1.Green, Revision: "rev-b"}
		ms.Status.Weights = v1alpha1.Weights{Stable: 100}
	case v1alpha1.PhaseRolledBack:
		ms.Status.Rollout.RolledBackRevision = "rev-b"
		ms.Status.Weights = v1alpha1.Weights{Stable: 100}
	}
	for _, o := range opts {
		o(ms)
	}
	return ms
}

func withGeneration(gen, observed int64) msOption {
	return func(ms *v1alpha1.ModelServer) {
		ms.Generation = gen
		ms.Status.ObservedGeneration = observed
	}
}

func withStalled(reason string) msOption {
	return func(ms *v1alpha1.ModelServer) {
		for i := range ms.Status.Conditions {
			switch ms.Status.Conditions[i].Type {
			case v1alpha1.ConditionStalled:
				ms.Status.Conditions[i].Status, ms.Status.Conditions[i].Reason = metav1.ConditionTrue, reason
				ms.Status.Conditions[i].Message = "container image cannot be pulled"
			case v1alpha1.ConditionReconciling:
				ms.Status.Conditions[i].Status = metav1.ConditionFalse
			}
		}
	}
}

func withConditions(c []metav1.Condition) msOption {
	return func(ms *v1alpha1.ModelServer) { ms.Status.Conditions = c }
}

func withoutStatus() msOption {
	return func(ms *v1alpha1.ModelServer) { ms.Status = v1alpha1.ModelServerStatus{} }
}

func fixtures() []fixture {
	p := func(ps ...v1alpha1.Phase) []v1alpha1.Phase { return ps }
	return []fixture{
		{name: "a first revision coming up is in progress", ms: newModelServer(v1alpha1.PhasePending),
			kstat: status.InProgressStatus, argo: "Progressing", phases: p(v1alpha1.PhasePending)},
		{name: "a rollout shifting traffic is in progress", ms: newModelServer(v1alpha1.PhaseProgressing),
			kstat: status.InProgressStatus, argo: "Progressing", phases: p(v1alpha1.PhaseProgressing)},
		{name: "a paused rollout is in progress for kstatus, suspended for Argo CD and needs a person",
			ms: newModelServer(v1alpha1.PhasePaused), kstat: status.InProgressStatus, argo: "Suspended",
			done: true, code: CodeNeedsHuman, phases: p(v1alpha1.PhasePaused)},
		{name: "a rollout awaiting promotion is in progress for kstatus, suspended for Argo CD and needs a person",
			ms: newModelServer(v1alpha1.PhaseAwaitingPromotion), kstat: status.InProgressStatus, argo: "Suspended",
			done: true, code: CodeNeedsHuman, phases: p(v1alpha1.PhaseAwaitingPromotion)},
		{name: "a healthy ModelServer is current", ms: newModelServer(v1alpha1.PhaseHealthy),
			kstat: status.CurrentStatus, argo: "Healthy", done: true, code: CodeHealthy, phases: p(v1alpha1.PhaseHealthy)},
		{name: "a rolled back revision has failed", ms: newModelServer(v1alpha1.PhaseRolledBack),
			kstat: status.FailedStatus, argo: "Degraded", done: true, code: CodeFailed, phases: p(v1alpha1.PhaseRolledBack)},
		{name: "a serving revision without available replicas is in progress for kstatus and degraded for Argo CD",
			ms: newModelServer(v1alpha1.PhaseDegraded), kstat: status.InProgressStatus, argo: "Degraded",
			phases: p(v1alpha1.PhaseDegraded)},
		{name: "a healthy status of an older generation is not trusted",
			ms:    newModelServer(v1alpha1.PhaseHealthy, withGeneration(4, 3)),
			kstat: status.InProgressStatus, argo: "Progressing"},
		{name: "a rolled back status of an older generation is not final",
			ms:    newModelServer(v1alpha1.PhaseRolledBack, withGeneration(4, 3)),
			kstat: status.InProgressStatus, argo: "Progressing"},
		{name: "a rollout stalled on inconclusive analysis has failed for every reader, though its phase is Progressing",
			ms:    newModelServer(v1alpha1.PhaseProgressing, withConditions(plan.StalledProgressing(3))),
			kstat: status.FailedStatus, argo: "Degraded", done: true, code: CodeFailed},
		{name: "a first revision whose spec cannot run has failed",
			ms:    newModelServer(v1alpha1.PhasePending, withStalled(v1alpha1.ReasonInvalidSpec)),
			kstat: status.FailedStatus, argo: "Degraded", done: true, code: CodeFailed},
		// kstatus cannot tell an object without status from one that needs none: the controller
		// must write observedGeneration and the conditions on its first pass.
		{name: "a ModelServer the controller has not seen is progressing for Argo CD and wait but current for kstatus",
			ms:    newModelServer(v1alpha1.PhasePending, withoutStatus()),
			kstat: status.CurrentStatus, argo: "Progressing"},
	}
}

func unstructuredOf(t *testing.T, ms *v1alpha1.ModelServer) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ms)
	if err != nil {
		t.Fatalf("converting to unstructured: %v", err)
	}
	return &unstructured.Unstructured{Object: m}
}

func TestEveryPhaseHasAFixtureAndConditions(t *testing.T) {
	covered := map[v1alpha1.Phase]bool{}
	for _, f := range fixtures() {
		for _, p := range f.phases {
			covered[p] = true
		}
	}
	for _, p := range []v1alpha1.Phase{v1alpha1.PhasePending, v1alpha1.PhaseProgressing, v1alpha1.PhasePaused,
		v1alpha1.PhaseAwaitingPromotion, v1alpha1.PhaseHealthy, v1alpha1.PhaseRolledBack, v1alpha1.PhaseDegraded} {
		if !covered[p] {
			t.Errorf("phase %s has no fixture", p)
		}
		if len(plan.PhaseConditions(p, 1)) != 3 {
			t.Errorf("phase %s: want Ready, Reconciling and Stalled, got %v", p, plan.PhaseConditions(p, 1))
		}
	}
}

func TestConditionsTableKeepsTheKstatusRules(t *testing.T) {
	for _, p := range []v1alpha1.Phase{v1alpha1.PhasePending, v1alpha1.PhaseProgressing, v1alpha1.PhasePaused,
		v1alpha1.PhaseAwaitingPromotion, v1alpha1.PhaseHealthy, v1alpha1.PhaseRolledBack, v1alpha1.PhaseDegraded} {
		got := map[string]metav1.ConditionStatus{}
		for _, c := range plan.PhaseConditions(p, 7) {
			got[c.Type] = c.Status
			if c.ObservedGeneration != 7 {
				t.Errorf("phase %s: condition %s has observedGeneration %d, want 7", p, c.Type, c.ObservedGeneration)
			}
			if c.Reason == "" {
				t.Errorf("phase %s: condition %s has no reason (the API server requires one)", p, c.Type)
			}
		}
		if got[v1alpha1.ConditionReconciling] == metav1.ConditionTrue && got[v1alpha1.ConditionStalled] == metav1.ConditionTrue {
			t.Errorf("phase %s: Reconciling and Stalled are both True", p)
		}
		if (got[v1alpha1.ConditionReady] == metav1.ConditionTrue) != (p == v1alpha1.PhaseHealthy) {
			t.Errorf("phase %s: Ready is %s; it must be True exactly in Healthy", p, got[v1alpha1.ConditionReady])
		}
	}
	if plan.PhaseConditions("Unknown", 1) != nil {
		t.Errorf("an unknown phase must get no conditions")
	}
}

func TestKstatusReadsEachPhaseAsDocumented(t *testing.T) {
	for _, f := range fixtures() {
		t.Run(f.name, func(t *testing.T) {
			res, err := status.Compute(unstructuredOf(t, f.ms))
			if err != nil {
				t.Fatalf("Compute: %v", err)
			}
			if res.Status != f.kstat {
				t.Errorf("kstatus = %s (%s), want %s", res.Status, res.Message, f.kstat)
			}
		})
	}
}

func TestAssessFinishesOnlyOnFinalPhasesOfTheCurrentGeneration(t *testing.T) {
	for _, f := range fixtures() {
		t.Run(f.name, func(t *testing.T) {
			r := Assess(f.ms)
			if r.Done != f.done || (f.done && r.Code != f.code) {
				t.Errorf("Assess = %+v, want done=%t code=%d", r, f.done, f.code)
			}
			if r.Message == "" {
				t.Errorf("Assess gave no message")
			}
		})
	}
}

// luaLiteral writes an unstructured value as a Lua table constructor.
func luaLiteral(v any) string {
	switch x := v.(type) {
	case nil:
		return "nil"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		b.WriteString("{")
		for _, k := range keys {
			fmt.Fprintf(&b, "[%s]=%s,", strconv.Quote(k), luaLiteral(x[k]))
		}
		b.WriteString("}")
		return b.String()
	case []any:
		var b strings.Builder
		b.WriteString("{")
		for _, e := range x {
			b.WriteString(luaLiteral(e) + ",")
		}
		b.WriteString("}")
		return b.String()
	case string:
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	default:
		return fmt.Sprint(x)
	}
}

// TestArgoCDHealthCheckMapsEachCase runs config/argocd/health.lua with a Lua interpreter, as
// Argo CD does (a global obj, the script returns hs). It is skipped when no interpreter is
// installed (apt-get install lua5.4); Argo CD runs Lua 5.1 and the script keeps to it.
func TestArgoCDHealthCheckMapsEachCase(t *testing.T) {
	lua := ""
	for _, name := range []string{"lua5.4", "lua5.3", "lua5.1", "lua"} {
		if p, err := exec.LookPath(name); err == nil {
			lua = p
			break
		}
	}
	if lua == "" {
		t.Skip("no Lua interpreter in PATH (apt-get install lua5.4); the Argo CD health check is not tested")
	}
	script, err := filepath.Abs("../../config/argocd/health.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fixtures() {
		t.Run(f.name, func(t *testing.T) {
			prog := fmt.Sprintf("obj = %s\nlocal hs = dofile(%s)\nio.write(hs.status, \"\\n\", hs.message)\n",
				luaLiteral(unstructuredOf(t, f.ms).Object), strconv.Quote(script))
			file := filepath.Join(t.TempDir(), "run.lua")
			if err := os.WriteFile(file, []byte(prog), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, stderr bytes.Buffer
			cmd := exec.Command(lua, file)
			cmd.Stdout, cmd.Stderr = &out, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("lua: %v: %s", err, stderr.String())
			}
			got, msg, _ := strings.Cut(out.String(), "\n")
			if got != f.argo {
				t.Errorf("Argo CD health = %s (%s), want %s", got, msg, f.argo)
			}
			if msg == "" {
				t.Errorf("Argo CD health has no message")
			}
		})
	}
}
