package v1alpha1

// DeploymentName is the name of the Deployment (and the prefix of the pods) of a color.
func (ms *ModelServer) DeploymentName(c Color) string { return ms.Name + "-" + string(c) }

// ServiceName is the name of the Service of a color; the HTTPRoute's backendRefs point at it.
func (ms *ModelServer) ServiceName(c Color) string { return ms.Name + "-" + string(c) }

// RouteName is the name of the HTTPRoute: the owned one, or the user's from spec.gateway.routeRef.
func (ms *ModelServer) RouteName() string {
	if ms.Spec.Gateway.RouteRef != nil {
		return ms.Spec.Gateway.RouteRef.Name
	}
	return ms.Name
}

// SelectorLabels select all pods of the ModelServer, both colors.
func (ms *ModelServer) SelectorLabels() map[string]string {
	return map[string]string{LabelModelServer: ms.Name}
}

// ColorLabels select the pods of one color.
func (ms *ModelServer) ColorLabels(c Color) map[string]string {
	return map[string]string{LabelModelServer: ms.Name, LabelColor: string(c)}
}

// RevisionObjectName is the name of the ControllerRevision that keeps a revision's pod template.
func RevisionObjectName(modelServer, revision string) string { return modelServer + "-" + revision }

// PoolName is the name of color c's InferencePool (spec.gateway.backend InferencePool).
func (ms *ModelServer) PoolName(c Color) string { return ms.Name + "-" + string(c) }

// UsesInferencePools reports whether the route's backendRefs point at InferencePools.
func (ms *ModelServer) UsesInferencePools() bool {
	return ms.Spec.Gateway.Backend == BackendInferencePool
}
