{{- define "modelship.fullname" -}}
{{- printf "%s" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "modelship.selectorLabels" -}}
app.kubernetes.io/name: modelship
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "modelship.labels" -}}
{{ include "modelship.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
