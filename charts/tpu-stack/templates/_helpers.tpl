{{/*
Helpers of the tpu-stack chart. Every name carries the chart's prefix: a chart that vendors
this one as a subchart shares its template namespace.
*/}}

{{/* tpu-stack.name: the chart's name (the standard app.kubernetes.io/name label). */}}
{{- define "tpu-stack.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* tpu-stack.componentFullname: <release>-<component> (or the block's nameOverride for the
component, or its fullnameOverride); not truncated, so a name that is too long fails validation
instead of being silently cut (KubeRay and the TPU webhook append to it). Call with (dict "ctx" $
"block" .Values.ray "component" "ray"). */}}
{{- define "tpu-stack.componentFullname" -}}
{{- if .block.fullnameOverride -}}
{{- .block.fullnameOverride | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .component .block.nameOverride -}}
{{- if contains $name .ctx.Release.Name -}}
{{- .ctx.Release.Name | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .ctx.Release.Name $name | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* tpu-stack.rayClusterName: the RayCluster's name; its head Service, auth Secret and the TPU
hostnames are built from it. */}}
{{- define "tpu-stack.rayClusterName" -}}
{{- include "tpu-stack.componentFullname" (dict "ctx" . "block" .Values.ray "component" "ray") -}}
{{- end -}}

{{/* tpu-stack.saxmlName: the prefix of the Saxml objects' names. */}}
{{- define "tpu-stack.saxmlName" -}}
{{- include "tpu-stack.componentFullname" (dict "ctx" . "block" .Values.saxml "component" "saxml") -}}
{{- end -}}

{{/* tpu-stack.vllmName: the vLLM Deployment's and Service's name. */}}
{{- define "tpu-stack.vllmName" -}}
{{- include "tpu-stack.componentFullname" (dict "ctx" . "block" .Values.vllm "component" "vllm") -}}
{{- end -}}

{{/* tpu-stack.vllmModelName: the model's name in the OpenAI API ("model" in a request; default: the release's name). */}}
{{- define "tpu-stack.vllmModelName" -}}
{{- default .Release.Name .Values.vllm.servedModelName -}}
{{- end -}}

{{/* tpu-stack.launcherCheck: helm test's container: the launcher's image running `tpu-launcher
<args>` (a few HTTP requests, and for Ray a pod list), read-only and small. Call with (dict "ctx"
$ "args" (list "cluster-check" "--address=...")); the caller may add the item's env after it. */}}
{{- define "tpu-stack.launcherCheck" -}}
{{- $image := .ctx.Values.ray.image -}}
- name: check
  image: {{ include "tpu-stack.image" (dict "image" $image "global" .ctx.Values.global "defaultTag" .ctx.Chart.AppVersion) }}
  imagePullPolicy: {{ $image.pullPolicy }}
  securityContext:
    {{- include "tpu-stack.containerSecurityContext" (dict "readOnlyRootFilesystem" true) | nindent 4 }}
  resources:
    requests:
      cpu: 100m
      memory: 256Mi
    limits:
      cpu: 500m
      memory: 256Mi
  command:
    - python
    - -m
    - launcher
    {{- range .args }}
    - {{ . }}
    {{- end }}
{{- end -}}

{{/* tpu-stack.chart: chart name and version for the helm.sh/chart label. */}}
{{- define "tpu-stack.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* tpu-stack.selectorLabels: the immutable selector set; call with (dict "ctx" $ "component" "head"). */}}
{{- define "tpu-stack.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tpu-stack.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end -}}

{{/* tpu-stack.labels: the standard label set; call with (dict "ctx" $ "component" "..."). */}}
{{- define "tpu-stack.labels" -}}
helm.sh/chart: {{ include "tpu-stack.chart" .ctx }}
{{ include "tpu-stack.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: tpu-stack
{{- end -}}

{{/* tpu-stack.rayPodLabels: Ray pod labels. The GKE TPU webhook mutates only pods labelled
app.kubernetes.io/name=kuberay, so that name replaces the chart's on Ray pods. */}}
{{- define "tpu-stack.rayPodLabels" -}}
app.kubernetes.io/name: kuberay
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: tpu-stack
{{- end -}}

{{/* tpu-stack.serviceAccountName: the account every pod runs as (Workload Identity). */}}
{{- define "tpu-stack.serviceAccountName" -}}
{{- $sa := .Values.global.serviceAccount -}}
{{- if $sa.name -}}
{{- $sa.name -}}
{{- else if contains "tpu-stack" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-tpu-stack" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* tpu-stack.image: registry/repository:tag@digest. global.imageRegistry replaces the
registry (a mirror holds the same repositories); an empty tag falls back to defaultTag. Call with
(dict "image" .Values.ray.image "global" .Values.global "defaultTag" .Chart.AppVersion). */}}
{{- define "tpu-stack.image" -}}
{{- $registry := default .image.registry .global.imageRegistry -}}
{{- $repo := ternary (printf "%s/%s" $registry .image.repository) .image.repository (ne $registry "") -}}
{{- $tag := default .defaultTag (toString .image.tag) -}}
{{- $ref := ternary (printf "%s:%s" $repo $tag) $repo (ne $tag "") -}}
{{- if .image.digest -}}
{{- printf "%s@%s" $ref .image.digest -}}
{{- else -}}
{{- $ref -}}
{{- end -}}
{{- end -}}

{{/* tpu-stack.gcsfuseAnnotations: what the GKE gcsfuse CSI driver needs to inject its sidecar. */}}
{{- define "tpu-stack.gcsfuseAnnotations" -}}
{{- $g := .Values.global.gcsfuse -}}
{{- if $g.enabled }}
gke-gcsfuse/volumes: "true"
gke-gcsfuse/cpu-limit: {{ $g.sidecar.cpuLimit | quote }}
gke-gcsfuse/memory-limit: {{ $g.sidecar.memoryLimit | quote }}
gke-gcsfuse/ephemeral-storage-limit: {{ $g.sidecar.ephemeralStorageLimit | quote }}
{{- end }}
{{- end -}}

{{/* tpu-stack.volumes: the bucket (CSI ephemeral volume) and an in-memory /dev/shm. */}}
{{- define "tpu-stack.volumes" -}}
{{- $g := .Values.global.gcsfuse -}}
- name: dshm
  emptyDir:
    medium: Memory
    {{- with .Values.global.shmSizeLimit }}
    sizeLimit: {{ toString . | quote }}
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

{{/* tpu-stack.volumeMounts: where the bucket and /dev/shm appear in the containers. */}}
{{- define "tpu-stack.volumeMounts" -}}
{{- $g := .Values.global.gcsfuse -}}
- name: dshm
  mountPath: /dev/shm
{{- if $g.enabled }}
- name: gcs-fuse-csi-ephemeral
  mountPath: {{ $g.mountPath | quote }}
{{- end }}
{{- end -}}


{{/* tpu-stack.podSecurityContext: Pod Security Admission's `restricted` profile for the
launcher image (uid 1000, Ray's image user); fsGroup lets it write the mounted volumes. */}}
{{- define "tpu-stack.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 1000
runAsGroup: 1000
fsGroup: 1000
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* tpu-stack.containerSecurityContext: `restricted` for one container. TPU chips need no
privileged mode on GKE 1.28 and later (GKE: "Deploy TPU workloads in GKE Standard", which
asks privileged only before 1.28; the chart requires 1.29). Call with (dict
"readOnlyRootFilesystem" <bool>). */}}
{{- define "tpu-stack.containerSecurityContext" -}}
allowPrivilegeEscalation: false
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
readOnlyRootFilesystem: {{ .readOnlyRootFilesystem | default false }}
{{- end -}}


{{/* tpu-stack.resources: a container's resources with every quantity a quoted string (a YAML
float such as 0.5 or +.1 is not a quantity to a CRD's int-or-string schema, so KubeRay's and
JobSet's objects would be refused), and google.com/tpu added when `chips` is set. Call with
(dict "resources" <values> "chips" <chips per host or 0>). */}}
{{- define "tpu-stack.resources" -}}
{{- $res := deepCopy (default dict .resources) -}}
{{- if .chips -}}
{{- $_ := set $res "requests" (merge (dict "google.com/tpu" .chips) (default dict $res.requests)) -}}
{{- $_ := set $res "limits" (merge (dict "google.com/tpu" .chips) (default dict $res.limits)) -}}
{{- end -}}
{{- if not (or $res.requests $res.limits $res.claims) }}{}{{ end -}}
{{- range $kind := list "requests" "limits" }}
{{- with get $res $kind }}
{{ $kind }}:
{{- range $name, $quantity := . }}
  {{ $name }}: {{ toString $quantity | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- with $res.claims }}
claims:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
