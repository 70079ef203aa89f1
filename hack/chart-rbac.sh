#!/usr/bin/env bash
# Turns controller-gen's RBAC (config/rbac/role.yaml: the manager's ClusterRole, and the Role in
# the controller's own namespace for the leader election Lease) into the Helm chart's RBAC
# templates (one source of truth): the cluster-wide ClusterRole, in namespaced mode
# (watchNamespaces) a Role with the same rules in each watched namespace, and in both modes the
# leader election Role in the release's namespace only.
#
# Usage: hack/chart-rbac.sh config/rbac/role.yaml cluster|namespaced|leader-election
set -euo pipefail
role=$1
mode=${2:-cluster}
# document KIND prints the document of kind KIND in role.yaml, without its leading ---.
document() {
	awk -v kind="$1" '
		/^---$/ { if (doc != "" && found) printf "%s", doc; doc = ""; found = 0; next }
		{ doc = doc $0 "\n"; if ($0 == "kind: " kind) found = 1 }
		END { if (found) printf "%s", doc }
	' "$role"
}
cluster=$(document ClusterRole)
rules=$(printf '%s\n' "$cluster" | sed -n '/^rules:/,$p')
if printf '%s\n' "$rules" | grep -q 'coordination.k8s.io'; then
	echo "$0: the manager's ClusterRole grants leases: keep the leader election Lease in a namespaced marker (namespace=modelship-system)" >&2
	exit 1
fi
case $mode in
cluster)
	printf '%s\n' '{{- if not .Values.watchNamespaces }}' '---'
	printf '%s\n' "$cluster" | sed -e 's/^  name: modelship-manager$/  name: {{ include "modelship.fullname" . }}-manager/'
	printf '%s\n' '{{- end }}'
	;;
namespaced)
	cat <<'HEAD'
{{- if .Values.watchNamespaces }}
{{- range (append .Values.watchNamespaces .Release.Namespace | uniq) }}
---
# Namespaced mode: the manager's rules in each watched namespace (and the release's, for its
# Events) instead of cluster-wide. The leader election Lease has a Role of its own
# (leader-election.yaml).
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ include "modelship.fullname" $ }}-manager
  namespace: {{ . }}
HEAD
	printf '%s\n' "$rules"
	cat <<'TAIL'
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ include "modelship.fullname" $ }}-manager
  namespace: {{ . }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ include "modelship.fullname" $ }}-manager
subjects:
- kind: ServiceAccount
  name: {{ include "modelship.fullname" $ }}
  namespace: {{ $.Release.Namespace }}
{{- end }}
---
# Cluster-scoped reads the capacity check needs (nodes), whether a Gateway mirrors (the
# GatewayClasses' supportedFeatures, for spec.rollout.shadow), and the reviews of secure /metrics.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ include "modelship.fullname" . }}-cluster-reads
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch]
- apiGroups: [gateway.networking.k8s.io]
  resources: [gatewayclasses]
  verbs: [get, list, watch]
- apiGroups: [authentication.k8s.io]
  resources: [tokenreviews]
  verbs: [create]
- apiGroups: [authorization.k8s.io]
  resources: [subjectaccessreviews]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ include "modelship.fullname" . }}-cluster-reads
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ include "modelship.fullname" . }}-cluster-reads
subjects:
- kind: ServiceAccount
  name: {{ include "modelship.fullname" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}
TAIL
	;;
leader-election)
	lease=$(document Role)
	if [ -z "$lease" ]; then
		echo "$0: no leader election Role in $role" >&2
		exit 1
	fi
	cat <<'HEAD'
# The leader election Lease, in the release's namespace only (both modes).
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ include "modelship.fullname" . }}-leader-election
  namespace: {{ .Release.Namespace }}
HEAD
	printf '%s\n' "$lease" | sed -n '/^rules:/,$p'
	cat <<'TAIL'
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ include "modelship.fullname" . }}-leader-election
  namespace: {{ .Release.Namespace }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ include "modelship.fullname" . }}-leader-election
subjects:
- kind: ServiceAccount
  name: {{ include "modelship.fullname" . }}
  namespace: {{ .Release.Namespace }}
TAIL
	;;
*)
	echo "usage: $0 ROLE.yaml cluster|namespaced|leader-election" >&2
	exit 2
	;;
esac
