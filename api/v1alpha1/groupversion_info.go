// Package v1alpha1 holds the ModelServer API of modelship (serving.modelship.dev/v1alpha1).
//
// +kubebuilder:object:generate=true
// +groupName=serving.modelship.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the ModelServer API.
	GroupVersion = schema.GroupVersion{Group: "serving.modelship.dev", Version: "v1alpha1"}

	// SchemeBuilder adds the API's types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ModelServer{}, &ModelServerList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
