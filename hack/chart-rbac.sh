#!/usr/bin/env bash
# Turns controller-gen's ClusterRole (config/rbac/role.yaml) into the Helm chart's RBAC templates
# (one source of truth): the cluster-wide ClusterRole, and in namespaced mode (watchNamespaces) a
# Role with the same rules in each watched namespace.
#
# Usage: hack/chart-rbac.sh config/rbac/role.yaml cluster|namespaced
set -euo pipefail
role=$1
mode=${2:-cluster}
rules=$(sed -n '/^rules:/,$p' "$role")
case $mode in
cluster)
	printf '%s\n' '{{- if not .Values.watchNamespaces }}'
	sed -e 's/^  name: modelship-manager$/  name: {{ include "modelship.fullname" . }}-manager/' "$role"
	printf '%s\n' '{{- end }}'
	;;
namespaced)
	cat <<'HEAD'
{{- if .Values.watchNamespaces }}
{{- range (append .Values.watchNamespaces .Release.Namespace | uniq) }}
---
# Namespaced mode: the manager's rules in each watched namespace (and the release's, for the
# leader election Lease and Events) instead of cluster-wide.
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
# Cluster-scoped reads the capacity check needs (nodes), and the reviews of secure /metrics.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ include "modelship.fullname" . }}-cluster-reads
rules:
- apiGroups: [""]
  resources: [nodes]
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
*)
	echo "usage: $0 ROLE.yaml cluster|namespaced" >&2
	exit 2
	;;
esac
