package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestFreshnessWaitsForTheCacheToCatchUpWithOurOwnWrite(t *testing.T) {
	var f freshness
	key := types.NamespacedName{Namespace: "ml", Name: "llama"}
	if f.stale(key, "a", "100") {
		t.Fatal("an object never written counts as stale")
	}
	f.wrote(key, "a", "120")
	if !f.stale(key, "a", "110") {
		t.Error("a cached copy older than our status write is not stale")
	}
	if f.stale(key, "a", "120") || f.stale(key, "a", "130") {
		t.Error("the copy we wrote, or a newer one, counts as stale")
	}
	f.wrote(key, "a", "115") // an older answer arriving late never moves the mark back
	if !f.stale(key, "a", "118") {
		t.Error("the mark moved back to an older write")
	}
	if f.stale(key, "b", "1") {
		t.Error("a re-created ModelServer (new UID) is judged by the old one's writes")
	}
	f.forget(key)
	if f.stale(key, "a", "110") {
		t.Error("a forgotten ModelServer is still remembered")
	}
}
