package controller

import (
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Ready pods averaged over the serving window count each pod from when its Ready condition
// last turned true: two Ready for hours, one for 15 s of a minute, one with no transition time
// (counted whole).
func TestTheReadyPodsAveragedOverTheWindow(t *testing.T) {
	now := time.Date(2026, 12, 7, 15, 0, 0, 0, time.UTC)
	pod := func(since time.Time) corev1.Pod {
		c := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
		if !since.IsZero() {
			c.LastTransitionTime = metav1.NewTime(since)
		}
		return corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Second))}, c}}}
	}
	pods := []corev1.Pod{pod(now.Add(-3 * time.Hour)), pod(now.Add(-time.Hour)), pod(now.Add(-15 * time.Second)), pod(time.Time{})}
	if got, want := readyOverWindow(pods, now, time.Minute), 3.25; math.Abs(got-want) > 1e-9 {
		t.Fatalf("readyOverWindow %g, want %g", got, want)
	}
	if got := readyOverWindow(pods, now, 0); got != 4 {
		t.Fatalf("readyOverWindow %g with no window, want the 4 Ready", got)
	}
}
