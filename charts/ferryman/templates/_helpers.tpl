{{/* The chart's name, overridable. */}}
{{- define "ferryman.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's full name: <release>-<chart>, or just <release> when it contains the
chart's name. Truncated to 63 characters (a DNS label).
*/}}
{{- define "ferryman.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "ferryman.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ferryman.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ferryman.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "ferryman.labels" -}}
helm.sh/chart: {{ include "ferryman.chart" . }}
{{ include "ferryman.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "ferryman.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ferryman.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "ferryman.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The leader-election Lease's name. */}}
{{- define "ferryman.lockName" -}}
{{- default (printf "%s-leader-election" (include "ferryman.fullname" .)) .Values.controller.leaderElection.lockName }}
{{- end }}

{{/*
--external-service: the value given, else the release's own Service, unless addresses
are given directly (--ingress-address) or no Service is created. Empty: no flag.
*/}}
{{- define "ferryman.externalService" -}}
{{- $status := .Values.controller.reportIngressStatus }}
{{- if $status.externalService }}
{{- $status.externalService }}
{{- else if and .Values.service.create (not $status.ingressAddress) }}
{{- printf "%s/%s" .Release.Namespace (include "ferryman.fullname" .) }}
{{- end }}
{{- end }}

{{/* The metrics Service exists (and a ServiceMonitor can use it). */}}
{{- define "ferryman.metricsService" -}}
{{- if and (gt (int .Values.controller.metricsPort) 0) (or .Values.metrics.service.create .Values.serviceMonitor.enabled) }}true{{ end }}
{{- end }}

{{/*
RBAC rules for what lives in a namespace, after the Ingress read rule: cluster-wide in
the ClusterRole, or in a Role per watchNamespace. Secrets are listed and watched
(TLS), never fetched one by one.
*/}}
{{- define "ferryman.namespacedRules" }}
  - apiGroups: ["networking.k8s.io"]
    resources: ["ingresses/status"]
    verbs: ["patch"]
  - apiGroups: [""]
    resources: ["services"]
    verbs: ["get", "list", "watch"]
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["list", "watch"]
  - apiGroups: ["discovery.k8s.io"]
    resources: ["endpointslices"]
    verbs: ["list", "watch"]
  - apiGroups: ["events.k8s.io"]
    resources: ["events"]
    verbs: ["create"]
  - apiGroups: ["k8s.nginx.org"]
    resources: ["virtualservers", "virtualserverroutes", "policies", "transportservers", "globalconfigurations"]
    verbs: ["get", "list", "watch"]
  - apiGroups: ["k8s.nginx.org"]
    resources: ["virtualservers/status", "virtualserverroutes/status", "policies/status", "transportservers/status"]
    verbs: ["patch"]
  {{- if and .Values.controller.allowedHostSuffixes (not .Values.controller.gatewayAPI.enable) }}
  # Tenant mode: ReferenceGrants allow references across namespaces.
  - apiGroups: ["gateway.networking.k8s.io"]
    resources: ["referencegrants"]
    verbs: ["get", "list", "watch"]
  {{- end }}
  {{- if .Values.controller.gatewayAPI.enable }}
  # Gateway API: its objects read, status written; Namespaces for allowedRoutes.
  - apiGroups: ["gateway.networking.k8s.io"]
    resources: ["gatewayclasses", "gateways", "httproutes", "tlsroutes", "referencegrants"]
    verbs: ["get", "list", "watch"]
  - apiGroups: ["gateway.networking.k8s.io"]
    resources: ["gatewayclasses/status", "gateways/status", "httproutes/status", "tlsroutes/status"]
    verbs: ["patch", "update"]
  - apiGroups: [""]
    resources: ["namespaces"]
    verbs: ["list", "watch"]
  {{- end }}
  {{- if include "ferryman.readinessGates" . }}
  # Readiness gates: pods are watched in opted-in namespaces only.
  - apiGroups: [""]
    resources: ["pods"]
    verbs: ["list", "watch"]
  # ...and the leader writes their gate condition.
  - apiGroups: [""]
    resources: ["pods/status"]
    verbs: ["patch"]
  {{- end }}
{{- end }}

{{/* The readiness gate webhook's MutatingWebhookConfiguration. */}}
{{- define "ferryman.webhookConfiguration" -}}
{{- printf "%s-readiness-gates" (include "ferryman.fullname" .) }}
{{- end }}

{{/* The readiness gate webhook's certificate Secret, in the release namespace. */}}
{{- define "ferryman.webhookSecret" -}}
{{- default (printf "%s-webhook-cert" (include "ferryman.fullname" .)) .Values.readinessGateWebhook.certSecret }}
{{- end }}

{{/* Gated routing (--readiness-gates): asked for, or implied by the webhook, whose
gate holds pods back until ferryman routes to them. */}}
{{- define "ferryman.readinessGates" -}}
{{- if or .Values.controller.readinessGates.enable .Values.readinessGateWebhook.enabled }}true{{ end }}
{{- end }}

{{/* --nginx-configmaps: the ConfigMap the chart makes from controller.config. */}}
{{- define "ferryman.configMapName" -}}
{{- default (printf "%s-nginx-config" (include "ferryman.fullname" .)) .Values.controller.config.name }}
{{- end }}
