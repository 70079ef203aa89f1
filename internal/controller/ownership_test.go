package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

func getService(ns, name string) (*corev1.Service, error) {
	s := &corev1.Service{}
	return s, k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, s)
}

func TestAServiceOfAnotherOwnerWithAChildsNameIsNotTakenOver(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken-green", Labels: map[string]string{"team": "search"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "search"},
			Ports: []corev1.ServicePort{{Name: "web", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if err := k8s.Create(ctx, foreign); err != nil {
		t.Fatalf("creating the other team's Service: %v", err)
	}
	ms := newModelServer(ns, "taken")
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatalf("creating ModelServer: %v", err)
	}
	eventually(t, 20*time.Second, "Stalled NameConflict naming the Service", func() error {
		c := condition(getMS(t, ms), v1alpha1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonNameConflict {
			return fmt.Errorf("Stalled = %+v", c)
		}
		if !strings.Contains(c.Message, "Service "+ns+"/taken-green") {
			return fmt.Errorf("the message does not name the Service: %q", c.Message)
		}
		return nil
	})
	if c := condition(getMS(t, ms), v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonNameConflict {
		t.Fatalf("Ready = %+v, want False NameConflict", c)
	}
	consistently(t, 2*time.Second, "nothing touched", func() error {
		got, err := getService(ns, "taken-green")
		if err != nil {
			return err
		}
		if len(got.OwnerReferences) > 0 || got.Spec.Selector["app"] != "search" || len(got.Spec.Ports) != 1 || got.Spec.Ports[0].Port != 80 {
			return fmt.Errorf("the other team's Service was changed: owners %v selector %v ports %v", got.OwnerReferences, got.Spec.Selector, got.Spec.Ports)
		}
		for _, f := range got.ManagedFields {
			if f.Manager == v1alpha1.FieldOwner {
				return fmt.Errorf("modelship manages fields of the other team's Service")
			}
		}
		if _, err := getDeployment(ns, "taken-blue"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("a Deployment was made despite the conflict: %v", err)
		}
		if _, err := getRoute(ns, ms.RouteName()); !apierrors.IsNotFound(err) {
			return fmt.Errorf("a route was made despite the conflict: %v", err)
		}
		return nil
	})
}

func TestAPortChangeLeavesTheStableColorsServiceOnItsOwnPort(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "port")
	startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: healthy})
	target := func(name string) (int32, int32, error) {
		s, err := getService(ns, name)
		if err != nil {
			return 0, 0, err
		}
		if len(s.Spec.Ports) != 1 {
			return 0, 0, fmt.Errorf("service %s has ports %v", name, s.Spec.Ports)
		}
		return s.Spec.Ports[0].Port, s.Spec.Ports[0].TargetPort.IntVal, nil
	}
	if _, tp, err := target("port-blue"); err != nil || tp != 8000 {
		t.Fatalf("blue targets %d (%v), want 8000", tp, err)
	}

	// The new revision listens on 9000: the candidate's Service targets 9000, the stable's
	// pods still listen on 8000 and its Service keeps targeting 8000.
	updateMS(t, ms, func(m *v1alpha1.ModelServer) {
		m.Spec.Port = 9000
		m.Spec.Template.Spec.Containers[0].Image = imageV2
		m.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort = 9000
	})
	waitCandidate(t, ms, imageV2)
	eventually(t, 20*time.Second, "green targets 9000", func() error {
		p, tp, err := target("port-green")
		if err != nil || p != 9000 || tp != 9000 {
			return fmt.Errorf("green exposes %d targets %d (%v)", p, tp, err)
		}
		return nil
	})
	consistently(t, 2*time.Second, "blue targets 8000 while it serves", func() error {
		p, tp, err := target("port-blue")
		if err != nil || p != 9000 || tp != 8000 {
			return fmt.Errorf("blue exposes %d targets %d (%v), want 9000 -> 8000", p, tp, err)
		}
		return nil
	})
	if d, err := getDeployment(ns, "port-blue"); err != nil || d.Annotations[v1alpha1.AnnotationPort] != "8000" {
		t.Fatalf("blue's Deployment does not record port 8000: %v %v", d.Annotations, err)
	}
}
