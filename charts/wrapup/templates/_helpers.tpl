{{/* The names of the release's objects: <fullname>-controller, ... With the release named wrapup, they are config/default's. */}}
{{- define "wrapup.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "wrapup.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "wrapup.labels" -}}
{{ include "wrapup.selectorLabels" . }}
app.kubernetes.io/part-of: wrapup
app.kubernetes.io/version: {{ include "wrapup.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "wrapup.tag" -}}
{{- .Values.image.tag | default .Chart.AppVersion -}}
{{- end -}}

{{- define "wrapup.serviceAccount" -}}
{{- include "wrapup.fullname" . }}-controller
{{- end -}}

{{- define "wrapup.webhookSecret" -}}
{{- include "wrapup.fullname" . }}-webhook-server-cert
{{- end -}}

{{- define "wrapup.webhookService" -}}
{{- include "wrapup.fullname" . }}-webhook-service
{{- end -}}

{{- define "wrapup.webhookConfiguration" -}}
{{- include "wrapup.fullname" . }}-validating-webhook-configuration
{{- end -}}

{{- define "wrapup.selfCerts" -}}
{{- if and .Values.webhook.enabled (eq .Values.webhook.certManagement "self") }}true{{ end -}}
{{- end -}}

{{/* A ServiceAccount subject of the release. */}}
{{- define "wrapup.subject" -}}
- kind: ServiceAccount
  name: {{ include "wrapup.serviceAccount" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}
