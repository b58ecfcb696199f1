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

{{/* The pods' selector: controller.selectorLabels replaces the chart's. */}}
{{- define "ferryman.selectorLabels" -}}
{{- with .Values.controller.selectorLabels }}
{{- toYaml . }}
{{- else -}}
app.kubernetes.io/name: {{ include "ferryman.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
{{- end }}

{{/* The controller's objects (workload, Service, HPA, PDB, GlobalConfiguration):
<fullname>-<controller.name>, or <fullname> when that is empty. */}}
{{- define "ferryman.controllerName" -}}
{{- if .Values.controller.name }}
{{- printf "%s-%s" (include "ferryman.fullname" .) .Values.controller.name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- include "ferryman.fullname" . }}
{{- end }}
{{- end }}

{{- define "ferryman.serviceName" -}}
{{- default (include "ferryman.controllerName" .) .Values.serviceNameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* controller.watchNamespace, a list or NIC's comma-separated string, as JSON. */}}
{{- define "ferryman.watchNamespaces" -}}
{{- $w := .Values.controller.watchNamespace }}
{{- if kindIs "string" $w }}
{{- $w = splitList "," $w }}
{{- end }}
{{- $out := list }}
{{- range $w }}
{{- if trim . }}
{{- $out = append $out (trim .) }}
{{- end }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/* --log-format from NIC's names too. */}}
{{- define "ferryman.logFormat" -}}
{{- if hasPrefix "json" .Values.controller.logFormat }}json{{ else }}text{{ end }}
{{- end }}

{{/* --log-level from NIC's names too. */}}
{{- define "ferryman.logLevel" -}}
{{- $l := .Values.controller.logLevel }}
{{- get (dict "trace" "debug" "warn" "warning" "fatal" "error") $l | default $l }}
{{- end }}

{{/* --nginx-reload-timeout in seconds: NIC's chart counts milliseconds (above 1000). */}}
{{- define "ferryman.reloadTimeout" -}}
{{- $t := .Values.controller.nginxReloadTimeout }}
{{- if gt (float64 $t) 1000.0 }}{{ divf $t 1000 }}{{ else }}{{ $t }}{{ end }}
{{- end }}

{{/* --metrics-port: prometheus.port, or 0 without prometheus.create. */}}
{{- define "ferryman.metricsPort" -}}
{{- if .Values.prometheus.create }}{{ int .Values.prometheus.port }}{{ else }}0{{ end }}
{{- end }}

{{/* --nginx-status-port: nginxStatus.port when enabled, else 0. */}}
{{- define "ferryman.nginxStatusPort" -}}
{{- if .Values.controller.nginxStatus.enable }}{{ int .Values.controller.nginxStatus.port }}{{ else }}0{{ end }}
{{- end }}

{{/* --nginx-status-allow-cidrs: a list or NIC's comma-separated string. */}}
{{- define "ferryman.nginxStatusCidrs" -}}
{{- $c := .Values.controller.nginxStatus.allowCidrs }}
{{- if kindIs "string" $c }}{{ $c | nospace }}{{ else }}{{ join "," $c }}{{ end }}
{{- end }}

{{/* --global-configuration: customName, else the chart's GlobalConfiguration with create. */}}
{{- define "ferryman.globalConfiguration" -}}
{{- $g := .Values.controller.globalConfiguration }}
{{- if $g.customName }}
{{- $parts := splitList "/" $g.customName }}
{{- if or (ne (len $parts) 2) (not (first $parts)) (not (last $parts)) }}
{{- fail "controller.globalConfiguration.customName must be NAMESPACE/NAME" }}
{{- end }}
{{- $g.customName }}
{{- else if $g.create }}
{{- printf "%s/%s" .Release.Namespace (include "ferryman.controllerName" .) }}
{{- end }}
{{- end }}

{{/* The Secret a defaultTLS/wildcardTLS value names (NAMESPACE/NAME): secret, else the
chart's made from cert and key; empty: none. Call with (list . "defaultTLS" "default-server-tls"). */}}
{{- define "ferryman.tlsSecret" -}}
{{- $root := index . 0 }}
{{- $tls := index $root.Values.controller (index . 1) }}
{{- if $tls.secret }}
{{- $tls.secret }}
{{- else if and $tls.cert $tls.key }}
{{- printf "%s/%s-%s" $root.Release.Namespace (include "ferryman.fullname" $root) (index . 2) }}
{{- end }}
{{- end }}

{{- define "ferryman.labels" -}}
helm.sh/chart: {{ include "ferryman.chart" . }}
{{ include "ferryman.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "ferryman.serviceAccountName" -}}
{{- $sa := .Values.controller.serviceAccount }}
{{- if $sa.create }}
{{- default (include "ferryman.fullname" .) $sa.name }}
{{- else }}
{{- default "default" $sa.name }}
{{- end }}
{{- end }}

{{- define "ferryman.image" -}}
{{- $image := .Values.controller.image }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) }}
{{- end }}
{{- end }}

{{/* The leader-election Lease's name. */}}
{{- define "ferryman.lockName" -}}
{{- default (printf "%s-leader-election" (include "ferryman.fullname" .)) .Values.controller.reportIngressStatus.leaderElectionLockName }}
{{- end }}

{{/*
--external-service: the value given (NIC's bare NAME is in the release namespace), else the release's own Service, unless addresses
are given directly (--ingress-address) or no Service is created. Empty: no flag.
*/}}
{{- define "ferryman.externalService" -}}
{{- $status := .Values.controller.reportIngressStatus }}
{{- if contains "/" $status.externalService }}
{{- $status.externalService }}
{{- else if $status.externalService }}
{{- printf "%s/%s" .Release.Namespace $status.externalService }}
{{- else if and .Values.controller.service.create (not $status.ingressAddress) }}
{{- printf "%s/%s" .Release.Namespace (include "ferryman.serviceName" .) }}
{{- end }}
{{- end }}

{{/* The metrics Service exists (and a ServiceMonitor can use it). */}}
{{- define "ferryman.metricsService" -}}
{{- if and .Values.prometheus.create (or .Values.prometheus.service.create .Values.prometheus.serviceMonitor.create) }}true{{ end }}
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
    resources: ["gatewayclasses", "gateways", "listenersets", "httproutes", "grpcroutes", "tlsroutes", "referencegrants", "backendtlspolicies"]
    verbs: ["get", "list", "watch"]
  - apiGroups: ["gateway.networking.k8s.io"]
    resources: ["gatewayclasses/status", "gateways/status", "listenersets/status", "httproutes/status", "grpcroutes/status", "tlsroutes/status", "backendtlspolicies/status"]
    verbs: ["patch", "update"]
  # Namespaces for allowedRoutes and allowedListeners; ConfigMaps for the caCertificateRefs of
  # BackendTLSPolicies and of Gateways' client certificate validation.
  - apiGroups: [""]
    resources: ["namespaces", "configmaps"]
    verbs: ["list", "watch"]
  {{- end }}
  {{- if .Values.controller.enableCertManager }}
  # cert-manager: the leader writes VirtualServers' Certificates.
  - apiGroups: ["cert-manager.io"]
    resources: ["certificates"]
    verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
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

{{/* --nginx-configmaps: controller.customConfigMap, else the ConfigMap the chart makes from controller.config. */}}
{{- define "ferryman.configMapName" -}}
{{- if .Values.controller.customConfigMap }}
{{- .Values.controller.customConfigMap }}
{{- else }}
{{- default (printf "%s-nginx-config" (include "ferryman.fullname" .)) .Values.controller.config.name }}
{{- end }}
{{- end }}
