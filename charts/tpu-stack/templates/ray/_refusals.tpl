{{/* tpu-stack.refusals.ray: The Ray cluster or job: names, auth, Services, the TPU worker group. A YAML list of messages; call with the root context. */}}
{{- define "tpu-stack.refusals.ray" -}}
{{- $msgs := list -}}
{{- if .Values.ray.enabled -}}
{{- $r := .Values.ray -}}
{{- $name := include "tpu-stack.rayClusterName" . -}}
{{- if $r.job.enabled -}}
{{- if not $r.job.args -}}
{{- $msgs = append $msgs "ray.job.args: a RayJob runs the launcher's train entrypoint with the job's arguments, and none are given; --set-json 'ray.job.args=[\"base.yml\",\"model_name=llama3-8b\",\"run_name=r\",\"steps=100\"]'." -}}
{{- end -}}
{{- /* The arguments reach the head through KubeRay's submitter's bash and Ray's job shell, quoted
  for both; a control character there is always a mistake (a pasted newline), never MaxText's. */ -}}
{{- range $i, $arg := $r.job.args -}}
{{- if regexMatch "[\\x00-\\x1f\\x7f]" (toString $arg) -}}
{{- $msgs = append $msgs (printf "ray.job.args: argument %d, %q, holds a control character (a newline, a tab); a MaxText argument is one line: remove it (a value with spaces is fine as one argument)." $i (toString $arg)) -}}
{{- end -}}
{{- end -}}
{{- /* KubeRay names the job's cluster <RayJob>-<5 random characters> (utils.GenerateRayClusterName). */ -}}
{{- if gt (len $name) 34 -}}
{{- $msgs = append $msgs (printf "ray.fullnameOverride: the RayJob name %q is %d characters; its cluster's name adds 6 and KubeRay's services and the TPU hostnames built from it allow 40; use a shorter release name or --set ray.fullnameOverride=<name of at most 34>." $name (len $name)) -}}
{{- end -}}
{{- end -}}
{{- if gt (len $name) 40 -}}
{{- $msgs = append $msgs (printf "ray.fullnameOverride: the RayCluster name %q is %d characters; KubeRay's %s-headless service and the TPU hostnames built from it allow 40; use a shorter release name or --set ray.fullnameOverride=<name of at most 40>." $name (len $name) $name) -}}
{{- end -}}
{{- if and (not $r.auth.enabled) (ne $r.head.serviceType "ClusterIP") -}}
{{- $msgs = append $msgs (printf "ray.auth.enabled: a %s head Service without token auth lets anyone who reaches it run code; --set ray.auth.enabled=true or --set ray.head.serviceType=ClusterIP." $r.head.serviceType) -}}
{{- end -}}
{{- /* KubeRay keeps a container's own RAY_AUTH_* over the ones it sets from authOptions. */ -}}
{{- range $group := list "head" "worker" -}}
{{- range (get $r $group).env -}}
{{- if has .name (list "RAY_AUTH_MODE" "RAY_AUTH_TOKEN" "RAY_AUTH_TOKEN_PATH" "RAY_ENABLE_K8S_TOKEN_AUTH") -}}
{{- $msgs = append $msgs (printf "ray.%s.env: %s would replace what KubeRay sets from ray.auth (KubeRay keeps a container's own value), switching token auth off or putting the token in the values; remove it: ray.auth.enabled decides the mode, and ray.auth.existingSecret names a token Secret of your own." $group .name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if eq $r.head.serviceType "NodePort" -}}
{{- $msgs = append $msgs "ray.head.serviceType: NodePort opens GCS (6379), the dashboard (8265) and the client port (10001), none of them TLS, on every node's address; keep ClusterIP and port-forward (tpu-launcher submit --release does), or an internal load balancer for named clients: --set ray.head.serviceType=LoadBalancer --set ray.head.loadBalancerSourceRanges={10.0.0.0/8}." -}}
{{- end -}}
{{- if eq $r.head.serviceType "LoadBalancer" -}}
{{- $msgs = concat $msgs (include "tpu-stack.sourceRangeErrors" (dict "key" "ray.head.loadBalancerSourceRanges" "ranges" $r.head.loadBalancerSourceRanges "what" "the Ray head (internal load balancer)") | fromYamlArray) -}}
{{- end -}}
{{- if $r.worker.tpu.enabled -}}
{{- $slice := include "tpu-stack.slice" (dict "tpu" $r.worker.tpu "path" "ray.worker.tpu" "ctx" $) | fromYaml -}}
{{- $msgs = concat $msgs $slice.errors -}}
{{- if $r.worker.tpu.releaseIdleAfterSeconds -}}
{{- if $r.job.enabled -}}
{{- $msgs = append $msgs "ray.worker.tpu.releaseIdleAfterSeconds: a RayJob's cluster is made for its job and deleted when it ends, so no slice idles; drop it (or ray.job.enabled, for a standing cluster that gives idle slices back)." -}}
{{- end -}}
{{- if .Values.kueue.queueName -}}
{{- $msgs = append $msgs "ray.worker.tpu.releaseIdleAfterSeconds: Kueue admits a queued RayCluster's slices as one workload and holds them; slices given back and asked for again behind its back break that; drop it, or use a RayJob (--set ray.job.enabled=true), which holds its TPUs only while it runs." -}}
{{- end -}}
{{- end -}}
{{- with $r.worker.tpu.minSlices -}}
{{- if gt (int .) (int $slice.slices) -}}
{{- $msgs = append $msgs (printf "ray.worker.tpu.minSlices: %d is more than the %d slice(s) of the worker group; --set ray.worker.tpu.minSlices=%d (or fewer), or raise ray.worker.tpu.slices." (int .) (int $slice.slices) (int $slice.slices)) -}}
{{- end -}}
{{- end -}}
{{- if and (eq (int $slice.hosts) 1) (gt (int $slice.slices) 1) -}}
{{- /* The webhook points MEGASCALE_COORDINATOR_ADDRESS at <group>-0-0.<cluster>-headless: a pod
hostname it sets, and a Service KubeRay creates, only for groups of more than one host. */ -}}
{{- $fix := ternary (printf "--set ray.worker.tpu.chipsPerHost=4 (each slice then %d hosts of 4 chips)" (div (int $slice.chips) 4)) "use a multi-host slice type (e.g. v6e-16) or --set ray.worker.tpu.slices=1" (and (gt (int $slice.chips) 4) (eq (mod (int $slice.chips) 4) 0)) -}}
{{- $msgs = append $msgs (printf "ray.worker.tpu.slices: %d slices of the single-host %s cannot start: the GKE TPU webhook points MEGASCALE_COORDINATOR_ADDRESS at a hostname and a headless Service that KubeRay creates only for worker groups of more than one host; %s." (int $slice.slices) $slice.name $fix) -}}
{{- end -}}
{{- /* The GKE TPU webhook's env (kuberay-tpu-webhook README; TPU_PROCESS_* on Ironwood). */ -}}
{{- range $r.worker.env -}}
{{- if or (has .name (list "TPU_WORKER_ID" "TPU_WORKER_HOSTNAMES" "TPU_NAME" "TPU_PROCESS_ADDRESSES" "TPU_PROCESS_PORT" "TPU_DEVICE_PLUGIN_ADDR")) (hasPrefix "MEGASCALE_" (toString .name)) -}}
{{- $msgs = append $msgs (printf "ray.worker.env: %s is set by the GKE TPU webhook from the worker's place in the slice (it would append a second, conflicting value); remove it from ray.worker.env (ray.worker.tpu.slices declares MEGASCALE_NUM_SLICES, and the webhook fills in the rest)." .name) -}}
{{- end -}}
{{- /* The chart sets these on TPU workers; GKE's TPU device plugin sets TPU_ACCELERATOR_TYPE,
which Ray reads for the slice's pod type: a second value (JAX_PLATFORMS=cpu) trains on the CPU. */ -}}
{{- if has .name (list "JAX_PLATFORMS" "ENABLE_PJRT_COMPATIBILITY" "TPU_ACCELERATOR_TYPE") -}}
{{- $msgs = append $msgs (printf "ray.worker.env: %s is set on TPU workers by %s; a second value would contradict the slice (JAX_PLATFORMS=cpu trains on the host's CPU); remove it from ray.worker.env (ray.worker.tpu.enabled=false gives a CPU worker group)." .name (ternary "GKE's TPU device plugin, from the node" "the chart, from ray.worker.tpu" (eq .name "TPU_ACCELERATOR_TYPE"))) -}}
{{- end -}}
{{- if eq .name "RAY_TPU_RESOURCE_PER_CHIP" -}}
{{- $msgs = append $msgs "ray.worker.env: RAY_TPU_RESOURCE_PER_CHIP makes Ray count TPU per device (two per tpu7x chip), but the launcher reserves a host by its chips, as Ray counts them by default and google.com/tpu does; remove it from ray.worker.env." -}}
{{- end -}}
{{- end -}}
{{- range $key := list "cloud.google.com/gke-tpu-accelerator" "cloud.google.com/gke-tpu-topology" -}}
{{- if hasKey $r.worker.nodeSelector $key -}}
{{- $msgs = append $msgs (printf "ray.worker.nodeSelector: %s is set from ray.worker.tpu; a second value would send the pods to nodes of another shape; remove it from ray.worker.nodeSelector." $key) -}}
{{- end -}}
{{- end -}}
{{- /* How the TPUs are obtained is one value (ray.worker.tpu.capacity): a capacity label of the
user's own beside it asks for two kinds at once (Spot and a ComputeClass's fallback: no node
has both, and no fallback ever happens). The labels are the TPU table's (launcher.core.tpu.capacity). */ -}}
{{- range $key := include "tpu-stack.capacityLabels" $ | fromYamlArray -}}
{{- if hasKey $r.worker.nodeSelector $key -}}
{{- $msgs = append $msgs (printf "ray.worker.nodeSelector: %s says how the TPUs are obtained, which ray.worker.tpu.capacity says once (a fallback list too), and the chart sets this label from it; remove it from ray.worker.nodeSelector and --set ray.worker.tpu.capacity=<spot, on-demand, flex-start, reservation:NAME, or a comma-separated fallback>." $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* `ray start` flags the chart or KubeRay set from other values: a second one would be a
duplicate key or a port the Services, the NetworkPolicy and the launcher do not use. */ -}}
{{- $owned := dict "head" (dict "dashboard-host" "the chart (0.0.0.0: the Service reaches it)" "dashboard-port" "the chart (8265: the Service, the NetworkPolicy and the launcher use it)" "port" "KubeRay (6379, the GCS port the workers join)" "block" "KubeRay") "worker" (dict "address" "KubeRay (the head's GCS)" "block" "KubeRay") -}}
{{- range $group, $flags := $owned -}}
{{- range $flag, $who := $flags -}}
{{- if hasKey (default dict (get $r $group).rayStartParams) $flag -}}
{{- $msgs = append $msgs (printf "ray.%s.rayStartParams: %s is set by %s; remove it from ray.%s.rayStartParams." $group $flag $who $group) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* Kueue's RayCluster webhook names the head's pod set "head" (kueue v0.15.2,
pkg/controller/jobs/raycluster: headGroupPodSetName) and refuses a worker group of that name. */ -}}
{{- if and .Values.ray.enabled .Values.kueue.queueName (eq (toString .Values.ray.worker.groupName) "head") -}}
{{- $msgs = append $msgs "ray.worker.groupName: \"head\" is the name Kueue gives the head's pod set, and its webhook refuses a worker group of that name under a queue; --set ray.worker.groupName=tpu-group (or any other name)." -}}
{{- end -}}
{{- if and .Values.kueue.priorityClass (not .Values.kueue.queueName) -}}
{{- $msgs = append $msgs (printf "kueue.priorityClass: %q is read by Kueue only for a queued workload, and no kueue.queueName is given, so it would be ignored; --set kueue.queueName=<LocalQueue>, or drop kueue.priorityClass." .Values.kueue.priorityClass) -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}
