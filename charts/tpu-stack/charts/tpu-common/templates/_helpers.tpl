{{/*
Helpers shared by tpu-stack and its subcharts. Every template namespace in an umbrella is
shared, so every name here carries the "tpu-common." prefix.
*/}}

{{/* tpu-common.name: the chart's name, or .Values.nameOverride. */}}
{{- define "tpu-common.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* tpu-common.fullname: <release>-<chart> (or fullnameOverride); not truncated, so a name that
is too long fails validation instead of being silently cut (KubeRay and the TPU webhook append
to it). */}}
{{- define "tpu-common.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* tpu-common.chart: chart name and version for the helm.sh/chart label. */}}
{{- define "tpu-common.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* tpu-common.selectorLabels: the immutable selector set; call with (dict "ctx" $ "component" "head"). */}}
{{- define "tpu-common.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tpu-common.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end -}}

{{/* tpu-common.labels: the standard label set; call with (dict "ctx" $ "component" "..."). */}}
{{- define "tpu-common.labels" -}}
helm.sh/chart: {{ include "tpu-common.chart" .ctx }}
{{ include "tpu-common.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: tpu-stack
{{- end -}}

{{/* tpu-common.rayPodLabels: Ray pod labels. The GKE TPU webhook mutates only pods labelled
app.kubernetes.io/name=kuberay, so that name replaces the chart's on Ray pods. */}}
{{- define "tpu-common.rayPodLabels" -}}
app.kubernetes.io/name: kuberay
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: tpu-stack
{{- end -}}

{{/* tpu-common.serviceAccountName: the account every pod runs as (Workload Identity). */}}
{{- define "tpu-common.serviceAccountName" -}}
{{- $sa := .Values.global.serviceAccount -}}
{{- if $sa.name -}}
{{- $sa.name -}}
{{- else if contains "tpu-stack" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-tpu-stack" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* tpu-common.image: registry/repository:tag@digest; global.imageRegistry overrides the
registry. Call with (dict "image" .Values.image "global" .Values.global). */}}
{{- define "tpu-common.image" -}}
{{- $registry := default .image.registry .global.imageRegistry -}}
{{- $repo := ternary (printf "%s/%s" $registry .image.repository) .image.repository (ne $registry "") -}}
{{- $ref := ternary (printf "%s:%s" $repo .image.tag) $repo (ne (toString .image.tag) "") -}}
{{- if .image.digest -}}
{{- printf "%s@%s" $ref .image.digest -}}
{{- else -}}
{{- $ref -}}
{{- end -}}
{{- end -}}

{{/* tpu-common.gcsfuseAnnotations: what the GKE gcsfuse CSI driver needs to inject its sidecar. */}}
{{- define "tpu-common.gcsfuseAnnotations" -}}
{{- $g := .Values.global.gcsfuse -}}
{{- if $g.enabled }}
gke-gcsfuse/volumes: "true"
gke-gcsfuse/cpu-limit: {{ $g.sidecar.cpuLimit | quote }}
gke-gcsfuse/memory-limit: {{ $g.sidecar.memoryLimit | quote }}
gke-gcsfuse/ephemeral-storage-limit: {{ $g.sidecar.ephemeralStorageLimit | quote }}
{{- end }}
{{- end -}}

{{/* tpu-common.volumes: the bucket (CSI ephemeral volume) and an in-memory /dev/shm. */}}
{{- define "tpu-common.volumes" -}}
{{- $g := .Values.global.gcsfuse -}}
- name: dshm
  emptyDir:
    medium: Memory
    {{- with .Values.global.shmSizeLimit }}
    sizeLimit: {{ . }}
    {{- end }}
{{- if $g.enabled }}
- name: gcs-fuse-csi-ephemeral
  csi:
    driver: gcsfuse.csi.storage.gke.io
    volumeAttributes:
      bucketName: {{ $g.bucketName | quote }}
      mountOptions: {{ $g.mountOptions | quote }}
{{- end }}
{{- end -}}

{{/* tpu-common.volumeMounts: where the bucket and /dev/shm appear in the containers. */}}
{{- define "tpu-common.volumeMounts" -}}
{{- $g := .Values.global.gcsfuse -}}
- name: dshm
  mountPath: /dev/shm
{{- if $g.enabled }}
- name: gcs-fuse-csi-ephemeral
  mountPath: {{ $g.mountPath }}
{{- end }}
{{- end -}}

{{/* tpu-common.tpuNodeSelector: the GKE node labels a TPU slice of this shape lands on. */}}
{{- define "tpu-common.tpuNodeSelector" -}}
cloud.google.com/gke-tpu-accelerator: {{ .gkeAccelerator }}
cloud.google.com/gke-tpu-topology: {{ .topology }}
{{- end -}}
