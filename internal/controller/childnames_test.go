package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// A ModelServer named as most models are (llama-3.1-8b) serves: its Deployments and HTTPRoute
// keep the name, its Services (which cannot hold a dot) get the documented derived names, the
// route points at them, and it becomes Ready. One named llama-3-1-8b beside it gets Services of
// its own.
func TestServesAModelServerWhoseNameHasDotsThroughServicesNamedForIt(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	dotted, dashed := newModelServer(ns, "llama-3.1-8b"), newModelServer(ns, "llama-3-1-8b")
	for _, ms := range []*v1alpha1.ModelServer{dotted, dashed} {
		if err := k8s.Create(ctx, ms); err != nil {
			t.Fatalf("creating ModelServer %s: %v", ms.Name, err)
		}
	}
	services := map[*v1alpha1.ModelServer][2]string{
		dotted: {"llama-3-1-8b-7b6335-blue", "llama-3-1-8b-7b6335-green"},
		dashed: {"llama-3-1-8b-blue", "llama-3-1-8b-green"},
	}
	for ms, names := range services {
		for i, c := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
			eventually(t, 20*time.Second, ms.Name+"'s "+string(c)+" Service "+names[i], func() error {
				s, err := getService(ns, names[i])
				if err != nil {
					return err
				}
				if s.Spec.Selector[v1alpha1.LabelModelServer] != ms.Name || s.Spec.Selector[v1alpha1.LabelColor] != string(c) {
					return fmt.Errorf("selector %v", s.Spec.Selector)
				}
				return ownedBy(s, getMS(t, ms))
			})
		}
	}
	eventually(t, 20*time.Second, "the dotted name's route on its Services", func() error {
		r, err := getRoute(ns, "llama-3.1-8b")
		if err != nil {
			return err
		}
		var got []string
		for _, b := range r.Spec.Rules[0].BackendRefs {
			got = append(got, string(b.Name))
		}
		if len(got) != 2 || got[0] != "llama-3-1-8b-7b6335-blue" || got[1] != "llama-3-1-8b-7b6335-green" {
			return fmt.Errorf("backendRefs %v", got)
		}
		return nil
	})
	eventually(t, 20*time.Second, "the dotted name's blue Deployment", func() error {
		_, err := getDeployment(ns, "llama-3.1-8b-blue")
		return err
	})
	markReady(t, ns, "llama-3.1-8b-blue")
	eventually(t, 20*time.Second, "llama-3.1-8b Ready", func() error {
		got := getMS(t, dotted)
		if c := condition(got, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("phase %s, Ready %+v, Stalled %+v", got.Status.Phase, c, condition(got, v1alpha1.ConditionStalled))
		}
		return nil
	})
}

// Through InferencePools, a dotted name keeps its dots: the pools are <name>-<color>, as the
// endpoint pickers' --pool-name gives them, and the route points at them.
func TestServesADottedNameThroughInferencePoolsNamedAfterIt(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "qwen-2.5-7b", onPools)
	if err := k8s.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	for _, c := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
		eventually(t, 20*time.Second, "pool "+ms.PoolName(c), func() error { _, err := getPool(ns, "qwen-2.5-7b-"+string(c)); return err })
	}
	eventually(t, 20*time.Second, "the route on the pools", func() error {
		r, err := getRoute(ns, "qwen-2.5-7b")
		if err != nil {
			return err
		}
		refs := r.Spec.Rules[0].BackendRefs
		if len(refs) != 2 || refs[0].Name != "qwen-2.5-7b-blue" || refs[1].Name != "qwen-2.5-7b-green" {
			return fmt.Errorf("backendRefs %+v", refs)
		}
		return nil
	})
}
