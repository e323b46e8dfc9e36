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

{{/* tpu-stack.rayAuthSecretName: the Secret with Ray's token under `auth_token`: the user's, or
the one KubeRay creates under the RayCluster's name (KubeRay: reconcileAuthSecret). */}}
{{- define "tpu-stack.rayAuthSecretName" -}}
{{- default (include "tpu-stack.rayClusterName" .) .Values.ray.auth.existingSecret -}}
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

{{/* tpu-stack.runtimeModule: the cluster's own door, the module every pod and job of the
release runs in the launcher image (`python -m <it> COMMAND`); launcher.core.runtime_door names it,
and tests/chart/test_render.py holds the two equal. */}}
{{- define "tpu-stack.runtimeModule" -}}launcher.runtime{{- end -}}

{{/* tpu-stack.launcherCheck: helm test's container: the launcher's image running `python -m
launcher.runtime <args>` (a few HTTP requests, and for Ray a pod list), read-only and small. Call with (dict "ctx"
$ "args" (list "cluster-check" "--address=...")); the caller may add the item's env after it. */}}
{{- define "tpu-stack.launcherCheck" -}}
{{- $image := .ctx.Values.ray.image -}}
- name: check
  image: {{ include "tpu-stack.launcherImage" .ctx }}
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
    - {{ include "tpu-stack.runtimeModule" .ctx }}
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

{{/* tpu-stack.parts: the release's parts that run pods ("ray", "vllm", "saxml"), each with
its own identity and its values block. */}}
{{- define "tpu-stack.parts" -}}
{{- $parts := dict -}}
{{- if .Values.ray.enabled }}{{ $_ := set $parts "ray" .Values.ray }}{{ end -}}
{{- if eq .Values.serving.engine "vllm" }}{{ $_ := set $parts "vllm" .Values.vllm }}{{ end -}}
{{- if eq .Values.serving.engine "saxml" }}{{ $_ := set $parts "saxml" .Values.saxml }}{{ end -}}
{{- toYaml $parts -}}
{{- end -}}

{{/* tpu-stack.serviceAccountName: the account a part's pods run as (Workload Identity): one
per part, so serving cannot act as training. Call with (dict "ctx" $ "part" "ray|vllm|saxml"). */}}
{{- define "tpu-stack.serviceAccountName" -}}
{{- $default := dict "ray" (include "tpu-stack.rayClusterName" .ctx) "vllm" (include "tpu-stack.vllmName" .ctx) "saxml" (include "tpu-stack.saxmlName" .ctx) -}}
{{- default (get $default .part) (get .ctx.Values .part).serviceAccount.name -}}
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

{{/* tpu-stack.launcherImage: the launcher image of the release's framework (ray.framework): an
empty tag falls back to the chart's appVersion with the framework's suffix (launcher.core.job.frameworks:
the torch image is `<version>-torch`). Call with the root context. */}}
{{- define "tpu-stack.launcherImage" -}}
{{- $suffix := include "tpu-stack.frameworkTagSuffix" .Values.ray.framework -}}
{{- include "tpu-stack.image" (dict "image" .Values.ray.image "global" .Values.global "defaultTag" (printf "%s%s" .Chart.AppVersion $suffix)) -}}
{{- end -}}

{{/* tpu-stack.frameworkTagSuffix: the image tag suffix of a framework (launcher.core.job.frameworks
says the same; tests/chart hold them equal). Call with the framework's name. */}}
{{- define "tpu-stack.frameworkTagSuffix" -}}
{{- get (dict "jax" "" "torch" "-torch") . -}}
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

{{/* tpu-stack.volumes: the bucket (CSI ephemeral volume) and an in-memory /dev/shm. Call with
(dict "ctx" $ "readOnly" <bool>): serving reads the bucket and never writes it. */}}
{{- define "tpu-stack.volumes" -}}
{{- $g := .ctx.Values.global.gcsfuse -}}
- name: dshm
  emptyDir:
    medium: Memory
    {{- with .ctx.Values.global.shmSizeLimit }}
    sizeLimit: {{ toString . | quote }}
    {{- end }}
{{- if $g.enabled }}
- name: gcs-fuse-csi-ephemeral
  csi:
    driver: gcsfuse.csi.storage.gke.io
    {{- if .readOnly }}
    readOnly: true
    {{- end }}
    volumeAttributes:
      bucketName: {{ $g.bucketName | quote }}
      mountOptions: {{ $g.mountOptions | quote }}
{{- end }}
{{- end -}}

{{/* tpu-stack.volumeMounts: where the bucket and /dev/shm appear in the containers. Call with
(dict "ctx" $ "readOnly" <bool>). */}}
{{- define "tpu-stack.volumeMounts" -}}
{{- $g := .ctx.Values.global.gcsfuse -}}
- name: dshm
  mountPath: /dev/shm
{{- if $g.enabled }}
- name: gcs-fuse-csi-ephemeral
  mountPath: {{ $g.mountPath | quote }}
  {{- if .readOnly }}
  readOnly: true
  {{- end }}
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

{{/* tpu-stack.clientPeers: the NetworkPolicy peers that may reach a part's client-facing
ports: helm test's pods, networkPolicy.clients, and a load balancer's source ranges when the
Service is one (validate.yaml requires them). Call with (dict "ctx" $ "tests" <helm test's
peer> "type" <Service type> "ranges" <its loadBalancerSourceRanges>). */}}
{{- define "tpu-stack.clientPeers" -}}
- {{ toYaml .tests | indent 2 | trim }}
{{- with .ctx.Values.networkPolicy.clients }}
{{ toYaml . }}
{{- end }}
{{- if eq .type "LoadBalancer" }}
{{- range .ranges }}
- ipBlock:
    cidr: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* tpu-stack.sourceRangeErrors: refusals (a YAML list) for a load balancer's source ranges:
at least one, none a catch-all. Call with (dict "key" <values path> "ranges" <list> "what" <it>). */}}
{{- define "tpu-stack.sourceRangeErrors" -}}
{{- $msgs := list -}}
{{- if not .ranges -}}
{{- $msgs = append $msgs (printf "%s: a load balancer for %s must name the clients it admits; --set %s={10.0.0.0/8} (your clients' CIDRs), or a ClusterIP Service and port-forward." .key .what .key) -}}
{{- end -}}
{{- range .ranges -}}
{{- if has . (list "0.0.0.0/0" "::/0") -}}
{{- $msgs = append $msgs (printf "%s: %s admits every address, which would open %s to anyone who reaches the load balancer; name your clients' CIDRs instead: --set %s={203.0.113.0/24}." $.key . $.what $.key) -}}
{{- end -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}

{{/* tpu-stack.serviceErrors: refusals (a YAML list) for a serving Service's values: a load
balancer names its clients, and its type (internal or not) is the chart's, not an annotation's.
Call with (dict "key" <values path of the service block> "service" <block> "what" <it>). */}}
{{- define "tpu-stack.serviceErrors" -}}
{{- $msgs := list -}}
{{- if eq .service.type "LoadBalancer" -}}
{{- $msgs = concat $msgs (include "tpu-stack.sourceRangeErrors" (dict "key" (printf "%s.loadBalancerSourceRanges" .key) "ranges" .service.loadBalancerSourceRanges "what" .what) | fromYamlArray) -}}
{{- end -}}
{{- range $a := list "networking.gke.io/load-balancer-type" "cloud.google.com/load-balancer-type" -}}
{{- if hasKey (default dict $.service.annotations) $a -}}
{{- $msgs = append $msgs (printf "%s.annotations: %s is the chart's (from %s.internal); an annotation here could make the load balancer external while the chart treats it as internal; remove it, and set %s.internal." $.key $a $.key $.key) -}}
{{- end -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}

{{/* tpu-stack.flagErrors: refusals (a YAML list) for extra arguments that repeat a flag the
chart sets from a value (the last one wins, and the chart's other parts would disagree with it).
Call with (dict "key" <values path> "args" <list> "owned" (dict "--flag" "<the value that sets it>")). */}}
{{- define "tpu-stack.flagErrors" -}}
{{- $msgs := list -}}
{{- range .args -}}
{{- $flag := first (splitList "=" (toString .)) -}}
{{- if hasKey $.owned $flag -}}
{{- $msgs = append $msgs (printf "%s: %s is the chart's (from %s); remove it from %s and set that instead." $.key $flag (get $.owned $flag) $.key) -}}
{{- end -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}

{{/* tpu-stack.shellWords: a list of arguments as one shell command line, each word quoted. */}}
{{- define "tpu-stack.shellWords" -}}
{{- $words := list -}}
{{- range . -}}
{{- $words = append $words (squote (replace "'" "'\\''" (toString .))) -}}
{{- end -}}
{{- join " " $words -}}
{{- end -}}

{{/* tpu-stack.metricsScrapers: the NetworkPolicy peers that scrape the Ray pods' metrics port:
monitoring.scrapers, or with a PodMonitoring GKE's managed collectors (a DaemonSet of pods
app.kubernetes.io/name=collector in namespace gmp-system, on the pod network). */}}
{{- define "tpu-stack.metricsScrapers" -}}
{{- with .Values.monitoring.scrapers }}
{{- toYaml . }}
{{- else }}
- namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: gmp-system
  podSelector:
    matchLabels:
      app.kubernetes.io/name: collector
{{- end }}
{{- end -}}
