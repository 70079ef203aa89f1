package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// DeploymentName is the name of the Deployment (and the prefix of the pods) of a color:
// <name>-<color>. A Deployment's name is a DNS subdomain, as the ModelServer's is, so dots are
// kept (llama-3.1-8b-blue).
func (ms *ModelServer) DeploymentName(c Color) string { return ms.Name + "-" + string(c) }

// ServiceName is the name of the Service of a color; the HTTPRoute's backendRefs point at it.
// See ServiceNameOf.
func (ms *ModelServer) ServiceName(c Color) string { return ServiceNameOf(ms.Name, c) }

// serviceHashLen is the number of hex digits of the name's hash a derived Service name ends with.
const serviceHashLen = 6

// ServiceNameOf is the name of color c's Service of the ModelServer named modelServer. A
// Service's name must be a DNS-1035 label (lower-case letters, digits and '-', starting with a
// letter, at most 63 characters), while a ModelServer's name is a DNS subdomain that may hold
// dots and start with a digit. A name that is such a label gives <name>-<color> (llama-blue).
// Any other has its dots turned into dashes, "ms-" put in front when it does not start with a
// letter, and the first 6 hex digits of the SHA-256 of the ModelServer's name appended:
// llama-3.1-8b gives llama-3-1-8b-<hash>-blue. The hash keeps two names that differ only there
// apart (llama-3.1-8b and llama-3-1-8b, whose Services are llama-3-1-8b-blue), and the name
// stays the same on every pass and every controller version that derives it so.
func ServiceNameOf(modelServer string, c Color) string {
	suffix := "-" + string(c)
	if len(validation.IsDNS1035Label(modelServer+suffix)) == 0 {
		return modelServer + suffix
	}
	base := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(modelServer))
	if base == "" || base[0] < 'a' || base[0] > 'z' {
		base = "ms-" + base
	}
	sum := sha256.Sum256([]byte(modelServer))
	hash := hex.EncodeToString(sum[:])[:serviceHashLen]
	// Room for "-<hash>-<color>" within 63 characters (a name stored before admission limited
	// it to 40 characters may be longer).
	if limit := validation.DNS1035LabelMaxLength - len(suffix) - 1 - serviceHashLen; len(base) > limit {
		base = base[:limit]
	}
	base = strings.TrimRight(base, "-")
	return base + "-" + hash + suffix
}

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

// HeaderRuleName is the name of the HTTPRoute rule that spec.rollout.headerRoute adds during a
// rollout: modelship-<name>-header, the ModelServer's name made a DNS label as for its Services
// (see ServiceNameOf), so that it is a valid rule name (a section name) and unique per
// ModelServer in a route that several share.
func (ms *ModelServer) HeaderRuleName() string {
	return "modelship-" + ServiceNameOf(ms.Name, "header")
}

// ShadowServiceName is the name of the TraefikService that spec.rollout.shadow.mirror
// TraefikService writes for the shadow phase: the ModelServer's name made a DNS label as for its
// Services (see ServiceNameOf), with "shadow".
func (ms *ModelServer) ShadowServiceName() string { return ServiceNameOf(ms.Name, "shadow") }

// Min is spec.autoscaling.minReplicas, 1 when unset (its default).
func (a *AutoscalingSpec) Min() int32 {
	if a == nil || a.MinReplicas == nil {
		return 1
	}
	return *a.MinReplicas
}
