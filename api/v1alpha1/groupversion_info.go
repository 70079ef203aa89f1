// Package v1alpha1 holds the ModelServer API of modelship (serving.modelship.dev/v1alpha1).
//
// +kubebuilder:object:generate=true
// +groupName=serving.modelship.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the ModelServer API.
	GroupVersion = schema.GroupVersion{Group: "serving.modelship.dev", Version: "v1alpha1"}

	// SchemeBuilder adds the API's types to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
