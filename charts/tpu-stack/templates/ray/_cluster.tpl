{{/*
tpu-stack.rayClusterSpec: the RayCluster's spec, indented two spaces, one for both ways a release
runs Ray: a standing RayCluster (ray.job.enabled=false) and a RayJob's rayClusterSpec (the
cluster lives only while its job runs). Call with the root context.
*/}}
{{- define "tpu-stack.rayClusterSpec" -}}
{{- $v := .Values.ray -}}
{{- $w := $v.worker -}}
{{- $slice := include "tpu-stack.slice" (dict "tpu" $w.tpu "path" "ray.worker.tpu" "ctx" $) | fromYaml }}
  rayVersion: {{ $v.rayVersion | quote }}
  {{- if $v.auth.enabled }}
  # Anyone who reaches a Ray dashboard can run code: token auth is on. The token's Secret is
  # KubeRay's (made once, owned by the RayCluster), never rendered here: a chart-made random
  # token would be new on every GitOps render, and workers started after it could not join.
  authOptions:
    mode: token
    {{- with $v.auth.existingSecret }}
    secretName: {{ . | quote }}
    {{- end }}
  {{- end }}
  headGroupSpec:
    serviceType: {{ $v.head.serviceType }}
    {{- if eq $v.head.serviceType "LoadBalancer" }}
    # Only ever inside the VPC, and only to the named ranges: GCS and the client port carry no TLS.
    headService:
      metadata:
        annotations:
          networking.gke.io/load-balancer-type: "Internal"
      spec:
        loadBalancerSourceRanges:
          {{- toYaml $v.head.loadBalancerSourceRanges | nindent 10 }}
    {{- end }}
    rayStartParams:
      dashboard-host: "0.0.0.0"
      {{- if and (not $w.tpu.enabled) (not (hasKey $v.head.rayStartParams "num-cpus")) }}
      # A CPU slice's hosts are the workers: its JaxTrainer workers ask for a CPU each
      # (launcher.core.tpu.slices.CpuSlices), and without this one could land on the head.
      num-cpus: "0"
      {{- end }}
      {{- with $v.head.rayStartParams }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    template:
      {{- $ports := list (dict "containerPort" 6379 "name" "gcs-server") (dict "containerPort" 8265 "name" "dashboard") (dict "containerPort" 10001 "name" "client") }}
      {{- /* launcher.core.release_facts: what the release tells its jobs (every Ray pod). */}}
      {{- $facts := dict "name" "LAUNCHER_RELEASE" "value" (include "tpu-stack.releaseFacts" (dict "ctx" . "slice" (ternary $slice nil (not (not $w.tpu.enabled))))) }}
      {{- $env := list $facts }}
      {{- $sidecars := list }}
      {{- if and $w.tpu.enabled $w.tpu.releaseIdleAfterSeconds }}
      {{- /* The idle check gives the worker group's slices back (launcher.core.tpu.idle). */}}
      {{- $sidecars = list (include "tpu-stack.idleReleaseContainer" (dict "ctx" . "env" (list $facts)) | fromYaml) }}
      {{- end }}
      {{- include "tpu-stack.rayPodTemplate" (dict "ctx" . "component" "head" "group" $v.head "container" "ray-head" "ports" $ports "env" $env "sidecars" $sidecars "kubeApi" (gt (len $sidecars) 0)) | nindent 6 }}
  workerGroupSpecs:
    - groupName: {{ $w.groupName | quote }}
      {{- if $w.tpu.enabled }}
      {{- if $w.tpu.releaseIdleAfterSeconds }}
      {{- /* No replicas: jobs ask for slices and the idle check gives them back (a rendered
        count would undo theirs on every upgrade); KubeRay's default, 0, starts with none. */}}
      minReplicas: 0
      {{- else }}
      replicas: {{ $slice.slices }}
      minReplicas: {{ $w.tpu.minSlices | default $slice.slices }}
      {{- end }}
      maxReplicas: {{ $slice.slices }}
      numOfHosts: {{ $slice.hosts }}
      {{- else }}
      replicas: 1
      minReplicas: 1
      maxReplicas: 1
      numOfHosts: {{ $w.cpu.hosts }}
      {{- end }}
      {{- with $w.rayStartParams }}
      rayStartParams:
        {{- toYaml . | nindent 8 }}
      {{- else }}
      rayStartParams: {}
      {{- end }}
      template:
        {{- $env := list $facts }}
        {{- if $w.tpu.enabled }}
        {{- $env = concat $env (list (dict "name" "JAX_PLATFORMS" "value" "tpu") (dict "name" "ENABLE_PJRT_COMPATIBILITY" "value" "true")) }}
        {{- if gt (int $slice.slices) 1 }}
        {{- /* Declared so the TPU webhook fills in MEGASCALE_SLICE_ID and the coordinator. */}}
        {{- $env = append $env (dict "name" "MEGASCALE_NUM_SLICES" "value" (toString $slice.slices)) }}
        {{- end }}
        {{- else }}
        {{- $env = concat $env (list (dict "name" "JAX_PLATFORMS" "value" "cpu") (dict "name" "XLA_FLAGS" "value" (printf "--xla_force_host_platform_device_count=%v" $w.cpu.devicesPerHost))) }}
        {{- end }}
        {{- include "tpu-stack.rayPodTemplate" (dict "ctx" . "component" "worker" "group" $w "container" "ray-worker" "tpu" (ternary $slice nil $w.tpu.enabled) "env" $env "gracePeriod" $w.terminationGracePeriodSeconds) | nindent 8 }}
{{- end -}}

{{/*
tpu-stack.kueueLabels: what queues the release's Ray object in Kueue (kueue.queueName, and its
priority), so Kueue admits it whole: every host of every slice, or nothing.
*/}}
{{- define "tpu-stack.kueueLabels" -}}
{{- with .Values.kueue.queueName }}
kueue.x-k8s.io/queue-name: {{ . | quote }}
{{- end }}
{{- with .Values.kueue.priorityClass }}
kueue.x-k8s.io/priority-class: {{ . | quote }}
{{- end }}
{{- end -}}

{{/*
tpu-stack.idleReleaseContainer: `python -m launcher.runtime idle-release` beside the Ray head: it reads the
head's job API (with the release's Ray token) and patches the worker group's replicas with the
head's service-account token (templates/ray/idle-release-rbac.yaml). Call with (dict "ctx" $
"env" <list>).
*/}}
{{- define "tpu-stack.idleReleaseContainer" -}}
{{- $v := .ctx.Values.ray -}}
name: idle-release
image: {{ include "tpu-stack.launcherImage" .ctx }}
imagePullPolicy: {{ $v.image.pullPolicy }}
command: ["python", "-m", {{ include "tpu-stack.runtimeModule" .ctx | quote }}, "idle-release"]
env:
  {{- toYaml .env | nindent 2 }}
  {{- if $v.auth.enabled }}
  - name: RAY_AUTH_TOKEN
    valueFrom:
      secretKeyRef:
        name: {{ include "tpu-stack.rayAuthSecretName" .ctx }}
        key: auth_token
  {{- end }}
resources:
  requests:
    cpu: 50m
    memory: 256Mi
  limits:
    memory: 256Mi
securityContext:
  {{- include "tpu-stack.containerSecurityContext" (dict "readOnlyRootFilesystem" true) | nindent 2 }}
{{- end -}}
