{{/*
tpu-stack.rayPodTemplate: the one pod template of head and workers (KubeRay's own chart copies
it per group and the copies drift). Call with (dict "ctx" $ "component" "head|worker" "group"
<values> "container" "ray-head|ray-worker" "tpu" <resolved slice or nil> "env" <list> "gracePeriod" <seconds: the worker's preStop notice, or nil>).
*/}}
{{- define "tpu-stack.rayPodTemplate" -}}
{{- $ctx := .ctx -}}
{{- $v := $ctx.Values.ray -}}
{{- $global := $ctx.Values.global -}}
{{- /* The memory checkpoint tier's volume, on TPU workers only (the head trains nothing). */ -}}
{{- $memoryTier := and .tpu (eq $ctx.Values.checkpoints.tier "memory") -}}
{{- $memoryMount := "/checkpoints-memory" -}}
{{- $memoryVolume := "checkpoints-memory" -}}{{- /* launcher.core.job.checkpoint_tiers.MEMORY_VOLUME reads it back */ -}}
metadata:
  labels:
    {{- include "tpu-stack.rayPodLabels" (dict "ctx" $ctx "component" .component) | nindent 4 }}
  {{- with (include "tpu-stack.gcsfuseAnnotations" $ctx | trim) }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "tpu-stack.serviceAccountName" (dict "ctx" $ctx "part" "ray") | quote }}
  {{- with $v.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if .kubeApi }}
  # The idle check and a job's driver set the worker group's replicas with the head's token
  # (its Role: get and patch this RayCluster, nothing else).
  automountServiceAccountToken: true
  {{- else if and .tpu (dig "capacityFallback" "" (default dict .tpu)) }}
  # A capacity fallback: each host reads its own node's labels to learn what it got (its
  # ClusterRole: get nodes, nothing else).
  automountServiceAccountToken: true
  {{- else }}
  # Ray reaches nothing of the Kubernetes API (no in-tree autoscaler); gcsfuse and Workload
  # Identity get their tokens without the pod's own.
  automountServiceAccountToken: false
  {{- end }}
  {{- with .gracePeriod }}
  # From termination to kill: the preStop hook's preemption notice, the save, then the kill.
  terminationGracePeriodSeconds: {{ . }}
  {{- end }}
  securityContext:
    {{- include "tpu-stack.podSecurityContext" $ctx | nindent 4 }}
  containers:
    - name: {{ .container }}
      image: {{ include "tpu-stack.launcherImage" $ctx }}
      imagePullPolicy: {{ $v.image.pullPolicy }}
      {{- with .gracePeriod }}
      lifecycle:
        preStop:
          exec:
            # Drains this pod's Ray node for preemption, deadline = the grace period: every
            # host saves the step they reach next (launcher.runtime.train.preemption).
            command: ["python", "-m", {{ include "tpu-stack.runtimeModule" $ctx | quote }}, "preemption-notice", "--grace", "{{ . }}"]
      {{- end }}
      {{- with .ports }}
      ports:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      env:
        {{- if $global.gcsfuse.enabled }}
        - name: LAUNCHER_OUTPUT_DIR
          value: {{ $global.gcsfuse.mountPath | quote }}
        {{- end }}
        {{- with $v.hfToken.secretName }}
        # huggingface_hub's token: `import hf://` on the head, Hub datasets and tokenizers.
        - name: HF_TOKEN
          valueFrom:
            secretKeyRef:
              name: {{ . | quote }}
              key: {{ $v.hfToken.secretKey | quote }}
        {{- end }}
        {{- with .tpu }}
        {{- include "tpu-stack.capacityEnv" . | nindent 8 }}
        {{- end }}
        {{- if $memoryTier }}
        # launcher.core.job.checkpoint_tiers: MaxText's local_checkpoint_directory on this host.
        - name: LAUNCHER_MEMORY_CHECKPOINT_DIR
          value: {{ $memoryMount }}
        {{- end }}
        {{- with .env }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with .group.env }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      resources:
        {{- include "tpu-stack.resources" (dict "resources" .group.resources "chips" (dig "chipsPerHost" 0 (default dict .tpu))) | trim | nindent 8 }}
      securityContext:
        {{- include "tpu-stack.containerSecurityContext" (dict "readOnlyRootFilesystem" $v.readOnlyRootFilesystem) | nindent 8 }}
      volumeMounts:
        {{- include "tpu-stack.volumeMounts" (dict "ctx" $ctx "readOnly" false) | nindent 8 }}
        {{- if $v.readOnlyRootFilesystem }}
        - name: tmp
          mountPath: /tmp
        {{- end }}
        {{- if $memoryTier }}
        - name: {{ $memoryVolume }}
          mountPath: {{ $memoryMount }}
        {{- end }}
    {{- with .sidecars }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  volumes:
    {{- include "tpu-stack.volumes" (dict "ctx" $ctx "readOnly" false) | nindent 4 }}
    {{- if $v.readOnlyRootFilesystem }}
    # Ray's session directory (/tmp/ray: sockets, logs, spilled objects) must be writable.
    - name: tmp
      emptyDir: {}
    {{- end }}
    {{- if $memoryTier }}
    # The memory checkpoint tier's copies: a tmpfs the pod's restarts of its processes keep and
    # a new pod starts empty; its size counts against the container's memory limit.
    - name: {{ $memoryVolume }}
      emptyDir:
        medium: Memory
        sizeLimit: {{ $ctx.Values.checkpoints.memorySize | quote }}
    {{- end }}
  {{- $selector := deepCopy (default dict .group.nodeSelector) }}
  {{- if .tpu }}
  {{- $selector = merge (include "tpu-stack.tpuNodeSelector" .tpu | fromYaml) $selector }}
  {{- end }}
  {{- with $selector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with include "tpu-stack.tpuTolerations" (dict "tpu" (default dict .tpu) "extra" .group.tolerations) | trim }}
  {{- . | nindent 2 }}
  {{- end }}
{{- end -}}
