{{/*
tpu-stack.vllmPodTemplate: the one pod template of every vLLM pod: the Deployment's (one
single-host slice), a RayService's head and TPU hosts, a LeaderWorkerSet's leader and workers.
Call with (dict "ctx" $ "component" "vllm|vllm-worker" "tpu" <resolved slice or nil> "container"
<name> "command" <list> "args" <list> "ports" <list> "probes" <bool> "env" <list> "resources"
<values>). Pods of component `vllm` answer the API (the Service selects them); `vllm-worker`
pods only hold chips.
*/}}
{{- define "tpu-stack.vllmPodTemplate" -}}
{{- $ctx := .ctx -}}
{{- $v := $ctx.Values.vllm -}}
metadata:
  labels:
    {{- if eq (include "tpu-stack.vllmController" $ctx) "rayservice" }}
    {{- include "tpu-stack.rayPodLabels" (dict "ctx" $ctx "component" .component) | nindent 4 }}
    {{- else }}
    {{- include "tpu-stack.labels" (dict "ctx" $ctx "component" .component) | nindent 4 }}
    {{- end }}
  {{- with (include "tpu-stack.gcsfuseAnnotations" $ctx | trim) }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "tpu-stack.serviceAccountName" (dict "ctx" $ctx "part" "vllm") | quote }}
  automountServiceAccountToken: false
  securityContext:
    {{- include "tpu-stack.podSecurityContext" $ctx | nindent 4 }}
  {{- with $v.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if .tpu }}
  nodeSelector:
    {{- include "tpu-stack.tpuNodeSelector" .tpu | nindent 4 }}
  {{- with include "tpu-stack.tpuTolerations" (dict "tpu" .tpu "extra" $v.tolerations) | trim }}
  {{- . | nindent 2 }}
  {{- end }}
  {{- end }}
  containers:
    - name: {{ .container }}
      image: {{ include "tpu-stack.image" (dict "image" $v.image "global" $ctx.Values.global "defaultTag" "") }}
      imagePullPolicy: {{ $v.image.pullPolicy }}
      {{- with .command }}
      command:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .args }}
      args:
        {{- range . }}
        - {{ . | quote }}
        {{- end }}
      {{- end }}
      env:
        {{- if dig "capacityFallback" "" (default dict .tpu) }}
        {{- include "tpu-stack.capacityEnv" .tpu | nindent 8 }}
        {{- end }}
        # The model comes from the bucket, never from the Hub.
        - name: HF_HUB_OFFLINE
          value: "1"
        # The image's user is ours (uid 1000): its home and caches live on /tmp.
        - name: HOME
          value: /tmp
        - name: VLLM_XLA_CACHE_PATH
          value: {{ include "tpu-stack.vllmCompileCache" $ctx | quote }}
        # vLLM's --api-key, from the Secret (not in the args, which `ps` and the pod spec show):
        # /v1/* answer 401 without `Authorization: Bearer <key>`; /health stays open to probes.
        - name: VLLM_API_KEY
          valueFrom:
            secretKeyRef:
              name: {{ $v.apiKey.secretName | quote }}
              key: {{ $v.apiKey.secretKey | quote }}
        {{- with .env }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with $v.env }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with .ports }}
      ports:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if .probes }}
      # Loading the weights and compiling for the TPU take minutes: the startup probe
      # allows startupSeconds before liveness counts; ready means the model answers.
      startupProbe:
        httpGet:
          path: /health
          port: http
        periodSeconds: 10
        failureThreshold: {{ div (int $v.startupSeconds) 10 }}
      readinessProbe:
        httpGet:
          path: /health
          port: http
        periodSeconds: 10
      livenessProbe:
        httpGet:
          path: /health
          port: http
        periodSeconds: 30
        failureThreshold: 4
      {{- end }}
      resources:
        {{- include "tpu-stack.resources" (dict "resources" .resources "chips" (dig "chipsPerHost" 0 (default dict .tpu))) | trim | nindent 8 }}
      securityContext:
        {{- include "tpu-stack.containerSecurityContext" (dict "readOnlyRootFilesystem" $v.readOnlyRootFilesystem) | nindent 8 }}
      {{- $cache := include "tpu-stack.vllmCompileCache" $ctx }}
      volumeMounts:
        {{- include "tpu-stack.volumeMounts" (dict "ctx" $ctx "readOnly" true) | nindent 8 }}
        - name: tmp
          mountPath: /tmp
        {{- if ne $cache "/tmp/vllm_xla_cache" }}
        - name: xla-cache
          mountPath: {{ $cache }}
        {{- end }}
  volumes:
    {{- include "tpu-stack.volumes" (dict "ctx" $ctx "readOnly" true) | nindent 4 }}
    - name: tmp
      emptyDir: {}
    {{- if ne $cache "/tmp/vllm_xla_cache" }}
    # The compile cache: the one directory of the bucket the server writes (gcsfuse only-dir).
    - name: xla-cache
      csi:
        driver: gcsfuse.csi.storage.gke.io
        volumeAttributes:
          bucketName: {{ $ctx.Values.global.gcsfuse.bucketName | quote }}
          mountOptions: {{ printf "%s,only-dir=%s" $ctx.Values.global.gcsfuse.mountOptions (include "tpu-stack.vllmCompileCacheDir" $ctx) | quote }}
    {{- end }}
{{- end -}}

{{/* tpu-stack.vllmSelectorLabels: what selects the vLLM pods of a component. A RayService's
pods carry KubeRay's name (the GKE TPU webhook mutates only pods named kuberay: the hosts'
TPU_WORKER_* env), the others the chart's. Call with (dict "ctx" $ "component" "vllm|vllm-worker"). */}}
{{- define "tpu-stack.vllmSelectorLabels" -}}
{{- if eq (include "tpu-stack.vllmController" .ctx) "rayservice" -}}
app.kubernetes.io/name: kuberay
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- else -}}
{{ include "tpu-stack.selectorLabels" . }}
{{- end -}}
{{- end -}}

{{/* tpu-stack.vllmController: how the release runs vLLM: vllm.controller, or by the slice: a
Deployment for one host, a RayService (Ray Serve LLM) for a multi-host slice. */}}
{{- define "tpu-stack.vllmController" -}}
{{- $v := .Values.vllm -}}
{{- if $v.controller -}}
{{- $v.controller -}}
{{- else -}}
{{- $t := include "tpu-stack.slice" (dict "tpu" $v.tpu "path" "vllm.tpu" "ctx" .) | fromYaml -}}
{{- ternary "rayservice" "deployment" (gt (int (default 1 $t.hosts)) 1) -}}
{{- end -}}
{{- end -}}

{{/* tpu-stack.vllmCompileCache: where vLLM keeps XLA's compile cache (VLLM_XLA_CACHE_PATH): with
vllm.compileCache.onBucket, a directory of the bucket of its own for this model, slice and image
(tpu-stack.vllmCompileCacheDir), so a restarted server loads its programs instead of compiling
them again; else the pod's disk, compiled again on each start. */}}
{{- define "tpu-stack.vllmCompileCache" -}}
{{- if and .Values.vllm.compileCache.onBucket .Values.global.gcsfuse.enabled -}}
/xla-cache
{{- else -}}
/tmp/vllm_xla_cache
{{- end -}}
{{- end -}}

{{/* tpu-stack.vllmCompileCacheDir: the cache's directory in the bucket, one path segment under
vllm.compileCache.prefix: the model's directory name and a hash of its path, the slice, the
image's tag (or digest): programs compiled for another of these never load. `tpu-launcher gke
plan` lets the server's account write under the prefix only (an IAM condition). */}}
{{- define "tpu-stack.vllmCompileCacheDir" -}}
{{- $v := .Values.vllm -}}
{{- $t := include "tpu-stack.slice" (dict "tpu" $v.tpu "path" "vllm.tpu" "ctx" .) | fromYaml -}}
{{- $image := $v.image.digest | default $v.image.tag | trimPrefix "sha256:" | trunc 16 -}}
{{- $model := printf "%s-%s" (base $v.model) (sha256sum $v.model | trunc 8) -}}
{{- $key := regexReplaceAll "[^A-Za-z0-9._-]" (printf "%s_%s_%s" $model (toString $t.name) $image) "_" -}}
{{- printf "%s/%s" (trimSuffix "/" $v.compileCache.prefix) $key -}}
{{- end -}}
