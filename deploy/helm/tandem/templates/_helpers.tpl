{{/* Names, labels, images and the controller's RBAC rules, shared by the templates. */}}

{{- define "tandem.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The object name prefix: "<release>-tandem", or the release name when it contains the chart name. */}}
{{- define "tandem.fullname" -}}
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

{{/*
Labels of every object. The controller's own objects are managed-by Helm; the agents' objects
(created by the controller) carry app.kubernetes.io/managed-by=tandem-controller, which the agent
NetworkPolicies and the PodMonitor select on.
*/}}
{{- define "tandem.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "tandem.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "tandem.controllerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "tandem.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "tandem.controllerLabels" -}}
{{ include "tandem.labels" . }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "tandem.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tandem.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: set it when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "tandem.leaseNamespace" -}}
{{- default .Release.Namespace .Values.controller.leaderElection.namespace }}
{{- end }}

{{/* repository@digest, or repository:tag (tag defaulting to the chart's appVersion). */}}
{{- define "tandem.image" -}}
{{- if .image.digest }}
{{- printf "%s@%s" .image.repository .image.digest }}
{{- else }}
{{- printf "%s:%s" .image.repository (default .chart.AppVersion .image.tag) }}
{{- end }}
{{- end }}

{{/* Namespaces that get the agent NetworkPolicies. */}}
{{- define "tandem.agentNamespaces" -}}
{{- if .Values.networkPolicy.agentNamespaces }}
{{- toJson .Values.networkPolicy.agentNamespaces }}
{{- else }}
{{- toJson (list .Release.Namespace) }}
{{- end }}
{{- end }}

{{/*
What tandem-controller does with the API (controller/reconcile/: kube_store.cc, manager.cc,
apply.cc, events.cc, both reconcilers), resource by resource. tests/deploy/test_chart_e2e.py
checks that every request the controller sends in a run against kube-sim is granted here and that
every grant here is either used in that run or listed there with its reason.
  - informers: list + watch of every kind below; the store's cache-miss fallback: get.
  - ModelDeployment: update (the tandem.dev/cleanup finalizer), status update.
  - children (ModelPool, ConfigMap, Service, Deployment, StatefulSet, PodDisruptionBudget): create,
    update when they drift, delete when no longer desired (pruning).
  - pods: list + watch only (readiness and scheduling of the pool members).
  - events: create; get + update to count a repeat in the existing event (client-go's aggregation).
  - the finalizers subresources, update: setting blockOwnerDeletion on children's ownerReferences needs it where
    the OwnerReferencesPermissionEnforcement admission plugin runs.
The Lease is a separate Role in the leader-election namespace.
*/}}
{{- define "tandem.controllerRules" -}}
- apiGroups: ["tandem.dev"]
  resources: ["modeldeployments"]
  verbs: ["get", "list", "watch", "update"]
- apiGroups: ["tandem.dev"]
  resources: ["modelpools"]
  verbs: ["get", "list", "watch", "create", "update", "delete"]
- apiGroups: ["tandem.dev"]
  resources: ["modeldeployments/status", "modelpools/status"]
  verbs: ["update"]
- apiGroups: ["tandem.dev"]
  resources: ["modeldeployments/finalizers", "modelpools/finalizers"]
  verbs: ["update"]
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets"]
  verbs: ["get", "list", "watch", "create", "update", "delete"]
- apiGroups: [""]
  resources: ["configmaps", "services"]
  verbs: ["get", "list", "watch", "create", "update", "delete"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "update", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  {{- /* create, update, delete: the quality gate's eval Pod (docs/eval.md); agents' pods are the StatefulSets'. */}}
  verbs: ["get", "list", "watch", "create", "update", "delete"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "get", "update"]
{{- end }}
