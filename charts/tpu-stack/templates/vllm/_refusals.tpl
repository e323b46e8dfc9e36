{{/* tpu-stack.refusals.vllm: vLLM serving. A YAML list of messages; call with the root context. */}}
{{- define "tpu-stack.refusals.vllm" -}}
{{- $msgs := list -}}
{{- $g := .Values.global -}}
{{- if eq .Values.serving.engine "vllm" -}}
{{- $v := .Values.vllm -}}
{{- $slice := include "tpu-stack.slice" (dict "tpu" $v.tpu "path" "vllm.tpu" "ctx" $) | fromYaml -}}
{{- $msgs = concat $msgs $slice.errors -}}
{{- $controller := include "tpu-stack.vllmController" . -}}
{{- if and (not $slice.errors) (ne (int $slice.hosts) 1) (eq $controller "deployment") -}}
{{- $msgs = append $msgs (printf "vllm.controller: a Deployment's pod is one host and %s is %d hosts; --set vllm.controller=rayservice (Ray Serve LLM over the whole slice; the default for a multi-host slice) or lws (a LeaderWorkerSet), or a single-host slice such as v6e-8." $slice.name (int $slice.hosts)) -}}
{{- end -}}
{{- if and (ne $controller "rayservice") $v.engineKwargs -}}
{{- $msgs = append $msgs (printf "vllm.engineKwargs: only a RayService hands engine_kwargs to vLLM (through Ray Serve LLM); this release's %s runs vLLM's own server, whose options are command-line flags, and would drop them: move them to vllm.extraArgs (--max-num-seqs=64, not max_num_seqs: 64)." (get (dict "deployment" "Deployment" "lws" "LeaderWorkerSet") $controller)) -}}
{{- end -}}
{{- if eq $controller "rayservice" -}}
{{- /* Ray Serve LLM reserves a multi-host slice whole from Ray 2.60 (ray.util.tpu.SlicePlacementGroup, as values.yaml says of vllm.rayService.rayVersion). */ -}}
{{- if not (semverCompare ">=2.60.0-0" (toString $v.rayService.rayVersion)) -}}
{{- $msgs = append $msgs (printf "vllm.rayService.rayVersion: %s is older than Ray 2.60, the first whose Ray Serve LLM reserves a multi-host TPU slice whole (ray.util.tpu.SlicePlacementGroup); build vllm.image with ray[serve,llm] 2.60 or later and --set vllm.rayService.rayVersion=<that version>." (toString $v.rayService.rayVersion)) -}}
{{- end -}}
{{- /* KubeRay names a RayService's cluster <RayService>-<5 random characters> (utils.GenerateRayClusterName), as a RayJob's. */ -}}
{{- $name := include "tpu-stack.vllmName" . -}}
{{- if gt (len $name) 34 -}}
{{- $msgs = append $msgs (printf "vllm.fullnameOverride: the RayService name %q is %d characters; its cluster's name adds 6 and KubeRay's services and the TPU hostnames built from it allow 40; use a shorter release name or --set vllm.fullnameOverride=<name of at most 34>." $name (len $name)) -}}
{{- end -}}
{{- with $v.extraArgs -}}
{{- $msgs = append $msgs "vllm.extraArgs: a RayService passes vLLM's arguments as Ray Serve LLM's engine_kwargs; move them to vllm.engineKwargs (max_num_seqs: 64, not --max-num-seqs=64)." -}}
{{- end -}}
{{- end -}}
{{- /* model and served_model_name: Ray Serve LLM refuses them in engine_kwargs and sets them
from model_loading_config (ray/llm/_internal/serve/engines/vllm/vllm_models.py). */ -}}
{{- $owned := dict "tensor_parallel_size" "the slice's devices" "distributed_executor_backend" "Ray, over the slice's hosts" "max_model_len" "vllm.maxModelLen" "model" "vllm.model" "served_model_name" "vllm.servedModelName" -}}
{{- range $key, $owner := $owned -}}
{{- if hasKey $v.engineKwargs $key -}}
{{- $msgs = append $msgs (printf "vllm.engineKwargs: %s is the chart's (from %s); remove it and set that instead." $key $owner) -}}
{{- end -}}
{{- end -}}
{{- /* The rest go to AsyncEngineArgs(**engine_kwargs) as written: each must be one of the
pinned vLLM's engine fields, read from its own source (files/vllm-engine-args.json, written by
ci/vllm_engine_args.py). With another vllm.image.tag only the form is checked: fields are
Python names, whatever the version. */ -}}
{{- $known := .Files.Get "files/vllm-engine-args.json" | fromJson -}}
{{- range $key := keys $v.engineKwargs | sortAlpha -}}
{{- if hasKey $owned $key -}}
{{- else if not (regexMatch "^[A-Za-z_][A-Za-z0-9_]*$" $key) -}}
{{- $msgs = append $msgs (printf "vllm.engineKwargs: %q is not an engine argument's name: they are Python field names (%s, as vLLM's engine takes them), not command-line flags." $key (regexReplaceAll "[^A-Za-z0-9_]" (trimPrefix "--" $key) "_")) -}}
{{- else if and (eq (toString $v.image.tag) $known.tag) (not (has $key $known.fields)) -}}
{{- $msgs = append $msgs (printf "vllm.engineKwargs: %q is not an engine argument of vLLM %s (vllm.image.tag; its vllm/engine/arg_utils.py EngineArgs): every replica would fail at start; check the name against vLLM's engine arguments (docs.vllm.ai, \"Engine Arguments\")." $key $known.tag) -}}
{{- end -}}
{{- end -}}
{{- if $v.tpu.minSlices -}}
{{- $msgs = append $msgs "vllm.tpu.minSlices: only the Ray worker group's slices are elastic (training); drop vllm.tpu.minSlices." -}}
{{- end -}}
{{- if $v.tpu.releaseIdleAfterSeconds -}}
{{- $msgs = append $msgs "vllm.tpu.releaseIdleAfterSeconds: only the Ray worker group gives idle slices back (a server is never idle by a job's measure); drop it, or scale the Deployment to 0 yourself." -}}
{{- end -}}
{{- if gt (int (default 1 $v.tpu.slices)) 1 -}}
{{- $msgs = append $msgs (printf "vllm.tpu.slices: each replica is one slice; --set vllm.replicas=%d instead (and drop vllm.tpu.slices)." (int $v.tpu.slices)) -}}
{{- end -}}
{{- if not $g.gcsfuse.enabled -}}
{{- $msgs = append $msgs "global.gcsfuse.enabled: vLLM reads the model from the bucket mount; --set global.gcsfuse.enabled=true --set global.gcsfuse.bucketName=<bucket>." -}}
{{- else if not $v.model -}}
{{- $msgs = append $msgs (printf "vllm.model: the model to serve is required: a Hugging Face format directory on the bucket mount; --set vllm.model=%s/<model directory in the bucket> (config.json, safetensors, tokenizer)." $g.gcsfuse.mountPath) -}}
{{- else if not (hasPrefix (printf "%s/" (trimSuffix "/" $g.gcsfuse.mountPath)) $v.model) -}}
{{- $msgs = append $msgs (printf "vllm.model: %q is not under the bucket mount %s, where the pod finds the model; --set vllm.model=%s/<path in the bucket>." $v.model $g.gcsfuse.mountPath (trimSuffix "/" $g.gcsfuse.mountPath)) -}}
{{- end -}}
{{- $msgs = concat $msgs (include "tpu-stack.pathErrors" (dict "key" "vllm.model" "path" $v.model) | fromYamlArray) -}}
{{- $msgs = concat $msgs (include "tpu-stack.pathErrors" (dict "key" "vllm.compileCache.prefix" "path" $v.compileCache.prefix) | fromYamlArray) -}}
{{- if not $v.apiKey.secretName -}}
{{- $msgs = append $msgs (printf "vllm.apiKey.secretName: vLLM answers only requests that carry its API key, kept in a Secret you create once: kubectl -n %s create secret generic %s-api-key --from-literal=%s=$(openssl rand -hex 32), then --set vllm.apiKey.secretName=%s-api-key." .Release.Namespace (include "tpu-stack.vllmName" .) $v.apiKey.secretKey (include "tpu-stack.vllmName" .)) -}}
{{- end -}}
{{- $msgs = concat $msgs (include "tpu-stack.flagErrors" (dict "key" "vllm.extraArgs" "args" $v.extraArgs "owned" (dict "--host" "its --host=0.0.0.0, every address of the pod" "--port" "vllm.containerPort" "--served-model-name" "vllm.servedModelName" "--tensor-parallel-size" "the slice's devices" "--distributed-executor-backend" "Ray, over a multi-host slice's hosts" "--max-model-len" "vllm.maxModelLen" "--api-key" "vllm.apiKey")) | fromYamlArray) -}}
{{- $msgs = concat $msgs (include "tpu-stack.serviceErrors" (dict "key" "vllm.service" "service" $v.service "what" "the model (and the TPUs)") | fromYamlArray) -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}
