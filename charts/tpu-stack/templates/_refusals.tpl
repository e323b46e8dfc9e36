{{- /* The chart's refusals by area (validate.yaml reports them all at once): checks a schema
cannot express. Each message names the value, what is wrong, what was given and the --set that
fixes it. The areas of a part live beside its templates (ray/, vllm/, saxml/). */ -}}
{{/* tpu-stack.refusals.names: The release's name, which names the Services and the RayCluster. A YAML list of messages; call with the root context. */}}
{{- define "tpu-stack.refusals.names" -}}
{{- $msgs := list -}}
{{- /* Services and the RayCluster are named after the release: Services need DNS-1035 labels. */ -}}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" .Release.Name) -}}
{{- $msgs = append $msgs (printf "release name: %q names the Services, which must be DNS-1035 labels (lowercase letters, digits and '-', starting with a letter); install it under a name such as %q." .Release.Name (regexReplaceAll "^[^a-z]+" (regexReplaceAll "[^a-z0-9-]" (lower .Release.Name) "-") "r")) -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}

{{/* tpu-stack.refusals.storage: The checkpoint bucket and where it is mounted. A YAML list of messages; call with the root context. */}}
{{- define "tpu-stack.refusals.storage" -}}
{{- $msgs := list -}}
{{- $g := .Values.global -}}
{{- if and $g.gcsfuse.enabled (not $g.gcsfuse.bucketName) -}}
{{- $msgs = append $msgs "global.gcsfuse.bucketName: a bucket is required while gcsfuse is enabled (checkpoints live there); --set global.gcsfuse.bucketName=<bucket>, or --set global.gcsfuse.enabled=false for clusters without GCS." -}}
{{- end -}}
{{- /* GCS bucket naming rules (cloud.google.com/storage/docs/buckets#naming), which the schema's
pattern cannot all say: the CSI mount of a name GCS refuses fails only when a pod starts. */ -}}
{{- $buckets := dict "global.gcsfuse.bucketName" $g.gcsfuse.bucketName -}}
{{- if eq .Values.serving.engine "saxml" }}{{ $_ := set $buckets "saxml.stateBucket" .Values.saxml.stateBucket }}{{ end -}}
{{- range $key := keys $buckets | sortAlpha -}}
{{- $b := toString (get $buckets $key) -}}
{{- $why := "" -}}
{{- if hasPrefix "goog" $b -}}
{{- $why = "names may not begin with \"goog\"" -}}
{{- else if regexMatch "g[o0]{2}g[l1]e" $b -}}
{{- $why = "names may not contain \"google\" or a close misspelling of it" -}}
{{- else if regexMatch "^[0-9]{1,3}(\\.[0-9]{1,3}){3}$" $b -}}
{{- $why = "names may not be an IP address in dotted-decimal form" -}}
{{- else if and (not (contains "." $b)) (gt (len $b) 63) -}}
{{- $why = printf "a name without dots is at most 63 characters (this is %d)" (len $b) -}}
{{- else -}}
{{- range splitList "." $b -}}
{{- if gt (len .) 63 }}{{ $why = "each dot-separated part is at most 63 characters" }}{{ end -}}
{{- end -}}
{{- end -}}
{{- if and $b $why -}}
{{- $msgs = append $msgs (printf "%s: %q is not a bucket name GCS allows: %s; --set %s=<an allowed name> (cloud.google.com/storage/docs/buckets#naming)." $key $b $why $key) -}}
{{- end -}}
{{- end -}}
{{- $msgs = concat $msgs (include "tpu-stack.pathErrors" (dict "key" "global.gcsfuse.mountPath" "path" $g.gcsfuse.mountPath) | fromYamlArray) -}}
{{- /* The bucket hides whatever the image keeps at its mount path. */ -}}
{{- $mount := trimSuffix "/" (toString $g.gcsfuse.mountPath) -}}
{{- if and $g.gcsfuse.enabled (or (has $mount (list "" "/tmp" "/dev" "/dev/shm" "/proc" "/sys" "/etc" "/usr" "/bin" "/sbin" "/lib" "/lib64" "/var" "/run" "/home" "/root")) (regexMatch "^/(proc|sys|dev)/" $mount)) -}}
{{- $msgs = append $msgs (printf "global.gcsfuse.mountPath: %q would hide the container's own %s (Ray's session lives in /tmp, /dev/shm is the in-memory volume); --set global.gcsfuse.mountPath=/data." (toString $g.gcsfuse.mountPath) (default "root filesystem" $mount)) -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}

{{/* tpu-stack.refusals.identity: Each part's Kubernetes and Google service accounts. A YAML list of messages; call with the root context. */}}
{{- define "tpu-stack.refusals.identity" -}}
{{- $msgs := list -}}
{{- /* Two parts that create an account of one name would render two ServiceAccounts of that
name (helm install fails), and serving would act as training. */ -}}
{{- $made := dict -}}
{{- range $part, $block := include "tpu-stack.parts" . | fromYaml -}}
{{- if $block.serviceAccount.create -}}
{{- $name := include "tpu-stack.serviceAccountName" (dict "ctx" $ "part" $part) -}}
{{- with get $made $name -}}
{{- $msgs = append $msgs (printf "%s.serviceAccount.name: %q is also the account %s.serviceAccount creates; each part runs as its own account (serving must not act as training): give one another name, or leave both names empty for the defaults." $part $name .) -}}
{{- end -}}
{{- $_ := set $made $name $part -}}
{{- end -}}
{{- end -}}
{{- range $part, $block := include "tpu-stack.parts" . | fromYaml -}}
{{- $sa := $block.serviceAccount -}}
{{- if and (not $sa.create) (not $sa.name) -}}
{{- $msgs = append $msgs (printf "%s.serviceAccount.name: with create=false the pods need an existing account; --set %s.serviceAccount.name=<account>." $part $part) -}}
{{- end -}}
{{- if and (not $sa.create) $sa.gcpServiceAccount -}}
{{- $msgs = append $msgs (printf "%s.serviceAccount.gcpServiceAccount: only an account the chart creates gets the Workload Identity annotation, so %s would be ignored; annotate your account (kubectl annotate serviceaccount %s iam.gke.io/gcp-service-account=%s) and drop this value, or --set %s.serviceAccount.create=true." $part $sa.gcpServiceAccount (default "<account>" $sa.name) $sa.gcpServiceAccount $part) -}}
{{- end -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}

{{/* tpu-stack.refusals.images: Image references: registry, repository, tag. A YAML list of messages; call with the root context. */}}
{{- define "tpu-stack.refusals.images" -}}
{{- $msgs := list -}}
{{- /* A registry belongs in image.registry: global.imageRegistry replaces it with a mirror, and
a repository that carries one would come out as <mirror>/<registry>/<repository>. */ -}}
{{- $images := dict "ray.image" .Values.ray.image "saxml.admin.image" .Values.saxml.admin.image "saxml.modelServer.image" .Values.saxml.modelServer.image "saxml.http.image" .Values.saxml.http.image "vllm.image" .Values.vllm.image -}}
{{- range $key := keys $images | sortAlpha -}}
{{- $tag := (get $images $key).tag -}}
{{- if kindIs "float64" $tag -}}
{{- $msgs = append $msgs (printf "%s.tag: %v is a number in YAML (1.10 reads as 1.1, so the wrong image would be pulled); quote it: tag: \"<tag>\", or --set-string %s.tag=<tag>." $key $tag $key) -}}
{{- end -}}
{{- $repo := toString (get $images $key).repository -}}
{{- $first := first (splitList "/" $repo) -}}
{{- if and (gt (len (splitList "/" $repo)) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- $msgs = append $msgs (printf "%s.repository: %q starts with the registry %s; --set %s.registry=%s --set %s.repository=%s (global.imageRegistry can then point every image at a mirror)." $key $repo $first $key $first $key (trimPrefix (printf "%s/" $first) $repo)) -}}
{{- end -}}
{{- end -}}
{{- /* The launcher image is one framework's (its tag's suffix says which, as the image command
tags it): a tag of the other framework's image would start jobs that stop on the head. */ -}}
{{- $tag := toString .Values.ray.image.tag -}}
{{- if $tag -}}
{{- $torchTag := hasSuffix (include "tpu-stack.frameworkTagSuffix" "torch") $tag -}}
{{- if and (eq .Values.ray.framework "torch") (not $torchTag) -}}
{{- $msgs = append $msgs (printf "ray.image.tag: %q is not a PyTorch image's tag, and ray.framework is torch; the torch image's tag ends in -torch (`tpu-launcher image` with ray.framework=torch builds and tags it): set ray.image.tag to it, or ray.framework=jax for a MaxText image." $tag) -}}
{{- else if and (eq .Values.ray.framework "jax") $torchTag -}}
{{- $msgs = append $msgs (printf "ray.image.tag: %q is a PyTorch image's tag (it ends in -torch), and ray.framework is jax; set ray.framework=torch to run PyTorch jobs, or ray.image.tag to a MaxText image's tag." $tag) -}}
{{- end -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}

{{/* tpu-stack.refusals.access: what stands between another pod and the Ray head's ports (which
run code): token auth and the NetworkPolicy, and the clients it admits. */}}
{{- define "tpu-stack.refusals.access" -}}
{{- $msgs := list -}}
{{- if and .Values.ray.enabled (not .Values.ray.auth.enabled) (not .Values.networkPolicy.enabled) -}}
{{- $msgs = append $msgs "ray.auth.enabled: with token auth off and the NetworkPolicy off, any pod in the cluster can reach the Ray head's dashboard and client ports and run code there; --set ray.auth.enabled=true (or keep --set networkPolicy.enabled=true, which admits only the release's own pods and named clients)." -}}
{{- end -}}
{{- range $key := list "clients" "kuberayOperator" -}}
{{- range $i, $peer := get $.Values.networkPolicy $key -}}
{{- with $peer.ipBlock -}}
{{- if has (toString .cidr) (list "0.0.0.0/0" "::/0") -}}
{{- $msgs = append $msgs (printf "networkPolicy.%s[%d].ipBlock.cidr: %s admits every address to the Ray head's dashboard, which runs code; name the CIDRs (203.0.113.0/24) or the pods (podSelector, namespaceSelector) that need it." $key $i .cidr) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $peers := dict "monitoring.scrapers" .Values.monitoring.scrapers "networkPolicy.clients" .Values.networkPolicy.clients "networkPolicy.kuberayOperator" .Values.networkPolicy.kuberayOperator -}}
{{- range $key := keys $peers | sortAlpha -}}
{{- range $i, $peer := get $peers $key -}}
{{- with $peer.ipBlock -}}
{{- range $j, $ex := default list .except -}}
{{- if not (include "tpu-stack.cidrWithin" (dict "outer" (toString $peer.ipBlock.cidr) "inner" (toString $ex))) -}}
{{- $msgs = append $msgs (printf "%s[%d].ipBlock.except[%d]: %s is not strictly inside the block's cidr %s, which the API server refuses; name a smaller range inside it, or drop it." $key $i $j $ex $peer.ipBlock.cidr) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}

{{/* tpu-stack.cidrWithin: "true" when the CIDR `inner` is strictly inside `outer` (a longer
prefix of the same network), as the API server requires of an ipBlock's except (IPv6 is not
checked here: "true"). Call with (dict "outer" <cidr> "inner" <cidr>). */}}
{{- define "tpu-stack.cidrWithin" -}}
{{- if or (contains ":" .outer) (contains ":" .inner) -}}true{{- else -}}
{{- $o := splitList "/" .outer -}}
{{- $n := splitList "/" .inner -}}
{{- $size := 1 -}}
{{- range until (sub 32 (int (index $o 1)) | int) }}{{ $size = mul $size 2 }}{{ end -}}
{{- $oa := 0 -}}{{- $na := 0 -}}
{{- range (splitList "." (index $o 0)) }}{{ $oa = add (mul $oa 256) (int .) }}{{ end -}}
{{- range (splitList "." (index $n 0)) }}{{ $na = add (mul $na 256) (int .) }}{{ end -}}
{{- if and (gt (int (index $n 1)) (int (index $o 1))) (eq (div $oa $size) (div $na $size)) -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* tpu-stack.pathErrors: refusals (a YAML list) for a path under the bucket mount or in the
bucket: a ".." part would leave it. Call with (dict "key" <values path> "path" <value>). */}}
{{- define "tpu-stack.pathErrors" -}}
{{- $msgs := list -}}
{{- if regexMatch "(^|/)\\.\\.(/|$)" (toString .path) -}}
{{- $msgs = append $msgs (printf "%s: %q has a \"..\" part, which leaves the bucket (or its mount); name the path inside it without \"..\"." .key (toString .path)) -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}

{{/* tpu-stack.refusals.resources: Every container's resources. A YAML list of messages; call with the root context. */}}
{{- define "tpu-stack.refusals.resources" -}}
{{- $msgs := list -}}
{{- /* "512m" is 0.512 bytes to Kubernetes: m is milli; the API server takes it and the
container cannot start. */ -}}
{{- $blocks := dict "ray.head" .Values.ray.head "ray.worker" .Values.ray.worker "vllm" .Values.vllm "saxml.admin" .Values.saxml.admin "saxml.modelServer" .Values.saxml.modelServer "saxml.http" .Values.saxml.http -}}
{{- range $key := keys $blocks | sortAlpha -}}
{{- $res := default dict (get $blocks $key).resources -}}
{{- range $kind := list "requests" "limits" -}}
{{- $q := toString (dig $kind "memory" "" $res) -}}
{{- if regexMatch "^[0-9.]+m$" $q -}}
{{- $msgs = append $msgs (printf "%s.resources.%s.memory: %s is %s milli-bytes (m is milli); did you mean %sMi? --set %s.resources.%s.memory=%sMi." $key $kind $q (trimSuffix "m" $q) (trimSuffix "m" $q) $key $kind (trimSuffix "m" $q)) -}}
{{- end -}}
{{- /* The chart sets google.com/tpu from the slice: a value here would be replaced unseen. */ -}}
{{- if hasKey (default dict (get $res $kind)) "google.com/tpu" -}}
{{- $msgs = append $msgs (printf "%s.resources.%s: google.com/tpu is set by the chart from the slice (its chips per host); remove it (the slice's type and chipsPerHost decide it)." $key $kind) -}}
{{- end -}}
{{- end -}}
{{- /* The API server refuses a request above its limit (requests must be <= limits). */ -}}
{{- range $name, $request := default dict $res.requests -}}
{{- $limit := get (default dict $res.limits) $name -}}
{{- if and $limit (gt (include "tpu-stack.quantity" $request | float64) (include "tpu-stack.quantity" $limit | float64)) -}}
{{- $msgs = append $msgs (printf "%s.resources.requests.%s: %v is more than its limit %v, which the API server refuses; --set %s.resources.limits.%s=%v (or a smaller request)." $key $name $request $limit $key $name $request) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}

{{/* tpu-stack.quantity: a Kubernetes quantity's value as a number (cores, bytes), to compare
two: its suffix, decimal (m, k, M, G, T, P, E) or binary (Ki .. Ei), or an exponent. */}}
{{- define "tpu-stack.quantity" -}}
{{- $q := toString . -}}
{{- $factors := dict "m" 0.001 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 -}}
{{- $suffix := regexFind "(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)$" $q -}}
{{- mulf (float64 (trimSuffix $suffix $q)) (get $factors $suffix | default 1.0) -}}
{{- end -}}

{{/* tpu-stack.refusals.checkpoints: The checkpoint tier (launcher.core.job.checkpoint_tiers, where
each refusal's reason is written for the jobs as well). A YAML list of messages; call with the
root context. */}}
{{- define "tpu-stack.refusals.checkpoints" -}}
{{- $msgs := list -}}
{{- $c := .Values.checkpoints -}}
{{- $w := .Values.ray.worker -}}
{{- if eq $c.tier "multi-tier" -}}
{{- $msgs = append $msgs "checkpoints.tier: multi-tier (GKE's managed multi-tier checkpointing) starts jax.distributed itself with the process ids its CSI driver writes for a JobSet's pods, and GKE documents it for JobSet workloads; on this RayCluster Ray Train's JaxTrainer starts jax.distributed before MaxText runs, so no replicator would ever be configured; --set checkpoints.tier=memory (Orbax's in-memory copies on the slices' hosts) or bucket." -}}
{{- else if eq $c.tier "memory" -}}
{{- if not (and .Values.ray.enabled $w.tpu.enabled) -}}
{{- $msgs = append $msgs "checkpoints.tier: memory keeps copies in the TPU workers' memory, and this release has no TPU workers (ray.worker.tpu.enabled=false); --set checkpoints.tier=bucket." -}}
{{- else if eq .Values.ray.framework "torch" -}}
{{- $msgs = append $msgs "checkpoints.tier: memory is Orbax's in-memory copies, which MaxText's jobs keep; a PyTorch job (ray.framework=torch) saves through its own torch.distributed.checkpoint and never uses them, while the tier's volume would take host memory from it; --set checkpoints.tier=bucket." -}}
{{- else if lt (int $w.tpu.slices) 2 -}}
{{- $msgs = append $msgs (printf "checkpoints.tier: memory needs 2 slices or more (Orbax keeps the in-memory copies on the slices after the first, which writes the bucket's), and ray.worker.tpu.slices is %d; --set ray.worker.tpu.slices=2, or --set checkpoints.tier=bucket." (int $w.tpu.slices)) -}}
{{- end -}}
{{- if not $c.memorySize -}}
{{- $msgs = append $msgs "checkpoints.memorySize: tier memory mounts an in-memory volume of this size in every TPU worker, and none is given; `tpu-launcher preflight --values <this file> -- <the job>` prints the size (two copies of a host's share of the checkpoint, plus 15%), e.g. --set checkpoints.memorySize=64Gi." -}}
{{- else -}}
{{- $limit := dig "limits" "memory" "" (default dict $w.resources) -}}
{{- if and $limit (ge (include "tpu-stack.quantity" $c.memorySize | float64) (include "tpu-stack.quantity" $limit | float64)) -}}
{{- $msgs = append $msgs (printf "checkpoints.memorySize: %s is not below the worker's memory limit %v (ray.worker.resources.limits.memory), which the in-memory volume counts against with the training process and Ray's object store; raise the limit, or lower checkpoints.memorySize to what preflight prints." $c.memorySize $limit) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}

{{/* tpu-stack.refusals.monitoring: Metrics scraping. A YAML list of messages; call with the root context. */}}
{{- define "tpu-stack.refusals.monitoring" -}}
{{- $msgs := list -}}
{{- /* A prometheus-operator Prometheus runs wherever its owner put it: the closed NetworkPolicy
must name it, or every scrape of the metrics port times out. */ -}}
{{- $mon := .Values.monitoring -}}
{{- if and $mon.enabled (not .Values.ray.enabled) (ne .Values.serving.engine "vllm") -}}
{{- $msgs = append $msgs (printf "monitoring.enabled: this release runs no Ray pods and no vLLM server (serving.engine: %s), and Saxml's servers serve no Prometheus metrics: nothing would be scraped; --set monitoring.enabled=false." (toString .Values.serving.engine)) -}}
{{- end -}}
{{- if and $mon.enabled (eq $mon.kind "PodMonitor") .Values.networkPolicy.enabled (not $mon.scrapers) -}}
{{- $msgs = append $msgs "monitoring.scrapers: with kind PodMonitor the NetworkPolicy must admit your Prometheus' pods to the metrics ports (Ray's 8080, vLLM's API port), or every scrape fails; --set monitoring.scrapers[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=<Prometheus' namespace> (or give a podSelector too), or --set monitoring.kind=PodMonitoring for GKE's managed Prometheus." -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}

{{/* tpu-stack.refusals.secrets: a token only by reference (a Secret), wherever one can go: every
part's env and every argument list the chart hands on, whichever parts are enabled (the values
are kept in Helm's release Secret, every revision, and a literal lands in the object, where every
reader of the namespace sees it). What gives a token away: the name it is given under (...TOKEN,
...SECRET, ...PASSWORD, ...API_KEY, ...ACCESS_KEY, ...PRIVATE_KEY, ...CREDENTIALS; a value that
is a path names a file, not a secret) or its form (Hugging Face hf_..., GitHub gh?_..., OpenAI
sk-..., an AWS access key AKIA..., a Google OAuth token ya29..., a PEM private key). RAY_AUTH_*
are refused in any form by the Ray part's own rule. */}}
{{- define "tpu-stack.refusals.secrets" -}}
{{- $msgs := list -}}
{{- $name := "(?i)(^|[-_.])(token|secret|password|passwd|api[-_]?key|access[-_]?key|private[-_]?key|credentials?)$" -}}
{{- $form := "(^|[=:\\s])(hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|ya29\\.[A-Za-z0-9_-]{20,})|-----BEGIN [A-Z ]*PRIVATE KEY-----" -}}
{{- $hfToken := "--set ray.hfToken.secretName=<Secret> (the chart sets HF_TOKEN from it on the head and every worker)" -}}
{{- $chartKey := dict "ray.head.env/HF_TOKEN" $hfToken "ray.worker.env/HF_TOKEN" $hfToken "vllm.env/VLLM_API_KEY" "--set vllm.apiKey.secretName=<Secret> (the chart sets VLLM_API_KEY from it)" -}}
{{- $envs := dict "ray.head.env" .Values.ray.head.env "ray.worker.env" .Values.ray.worker.env "vllm.env" .Values.vllm.env -}}
{{- range $key := keys $envs | sortAlpha -}}
{{- range $i, $e := get $envs $key -}}
{{- $value := toString (default "" $e.value) -}}
{{- $named := and (regexMatch $name (toString $e.name)) (not (hasPrefix "/" $value)) -}}
{{- if and (hasKey $e "value") (not (hasPrefix "RAY_AUTH_" (toString $e.name))) (or $named (regexMatch $form $value)) -}}
{{- $fix := get $chartKey (printf "%s/%s" $key $e.name) | default (printf "put it in a Secret (kubectl create secret generic <Secret> --from-literal=<key>=...) and give %s[%d] valueFrom.secretKeyRef (name: <Secret>, key: <key>) in place of value" $key $i) -}}
{{- $msgs = append $msgs (printf "%s[%d]: %s is given as a literal value, a secret in plain values (it would be in the pod spec, and in Helm's release Secret of every revision); %s." $key $i $e.name $fix) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $args := dict "ray.job.args" .Values.ray.job.args "vllm.extraArgs" .Values.vllm.extraArgs "saxml.modelServer.extraArgs" .Values.saxml.modelServer.extraArgs -}}
{{- range $key := keys $args | sortAlpha -}}
{{- range $i, $arg := get $args $key -}}
{{- $a := toString $arg -}}
{{- $option := regexReplaceAll "^-{0,2}([A-Za-z0-9_.-]+)(=.*)?$" $a "${1}" -}}
{{- $valued := or (hasPrefix "-" $a) (contains "=" $a) -}}
{{- if or (and $valued (regexMatch $name $option) (not (regexMatch "=/" $a))) (regexMatch $form $a) -}}
{{- $shown := ternary (regexReplaceAll "=.*" $a "=...") "a token's form" (contains "=" $a) -}}
{{- $msgs = append $msgs (printf "%s: argument %d gives a secret in plain values (%s; the arguments are in the object and in Helm's release Secret); pass the token by reference: an env var from a Secret (valueFrom.secretKeyRef) the program reads (HF_TOKEN for the Hub: ray.hfToken.secretName), never as an argument." $key $i $shown) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}

{{/* tpu-stack.refusals.rendered: what the API server and the kubelet would make of the pods the
chart renders from these values, checked on the rendered objects themselves, every pod template
of every part at once (so no part's own list of names can fall behind its template): a mountPath
twice in one container the API server refuses ("must be unique", Kubernetes' ValidateVolumeMounts;
KubeRay would fail to create the pods after the install succeeded), and an env name twice the
kubelet resolves silently, keeping the last (a value of the user's over the chart's own, or the
chart's over the user's). POD_TEMPLATE_FILES lists every template that renders a pod
(tests/chart/test_value_rules.py holds the list to the templates). */}}
{{- define "tpu-stack.refusals.rendered" -}}
{{- $msgs := list -}}
{{- $files := list "ray/raycluster.yaml" "ray/rayjob.yaml" "vllm/deployment.yaml" "vllm/leaderworkerset.yaml" "vllm/rayservice.yaml" "saxml/admin-deployment.yaml" "saxml/http-deployment.yaml" "saxml/model-jobset.yaml" "tests/test-ray-cluster.yaml" "tests/test-vllm.yaml" -}}{{- /* POD_TEMPLATE_FILES */ -}}
{{- range $file := $files -}}
{{- range $doc := splitList "\n---" (include (printf "%s/%s" $.Template.BasePath $file) $) -}}
{{- $obj := fromYaml $doc -}}
{{- if $obj.kind -}}
{{- $where := printf "%s %s" $obj.kind $obj.metadata.name -}}
{{- $msgs = concat $msgs (include "tpu-stack.podTemplateErrors" (dict "node" $obj "where" $where "kind" $obj.kind) | fromYamlArray) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}

{{/* tpu-stack.podTemplateErrors: the containers' duplicate mount paths and env names anywhere
under `node` (a pod spec is any map with a list of containers). Call with (dict "node" <object>
"where" "<kind> <name>" "kind" <kind>). */}}
{{- define "tpu-stack.podTemplateErrors" -}}
{{- $msgs := list -}}
{{- $ctx := . -}}
{{- if kindIs "map" .node -}}
{{- if kindIs "slice" .node.containers -}}
{{- range $c := concat .node.containers (default list .node.initContainers) -}}
{{- $part := "this part's env" -}}
{{- if has $ctx.kind (list "RayCluster" "RayJob") }}{{ $part = ternary "ray.head.env" "ray.worker.env" (eq $c.name "ray-head") }}{{ else if has $ctx.kind (list "RayService" "Deployment" "LeaderWorkerSet") }}{{ $part = "vllm.env" }}{{ end -}}
{{- $seen := dict -}}
{{- range $e := default list $c.env -}}
{{- if hasKey $seen $e.name -}}
{{- $msgs = append $msgs (printf "%s: %s, container %s: env %s is set twice, once by the chart and once more by %s (the kubelet keeps the last, silently); remove it from %s (the chart README says which value sets it)." $part $ctx.where $c.name $e.name $part $part) -}}
{{- end -}}
{{- $_ := set $seen $e.name true -}}
{{- end -}}
{{- $mounts := dict -}}
{{- range $m := default list $c.volumeMounts -}}
{{- $path := trimSuffix "/" (toString $m.mountPath) -}}
{{- with get $mounts $path -}}
{{- $msgs = append $msgs (printf "global.gcsfuse.mountPath: %s, container %s: volumes %s and %s are both mounted at %s, which the API server refuses (mountPath must be unique: KubeRay or the controller would fail to make the pods after the install); --set global.gcsfuse.mountPath=/data, or another path no other volume of the chart uses." $ctx.where $c.name . $m.name $path) -}}
{{- end -}}
{{- $_ := set $mounts $path $m.name -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- range $k, $v := .node -}}
{{- $msgs = concat $msgs (include "tpu-stack.podTemplateErrors" (dict "node" $v "where" $ctx.where "kind" $ctx.kind) | fromYamlArray) -}}
{{- end -}}
{{- end -}}
{{- else if kindIs "slice" .node -}}
{{- range $v := .node -}}
{{- $msgs = concat $msgs (include "tpu-stack.podTemplateErrors" (dict "node" $v "where" $ctx.where "kind" $ctx.kind) | fromYamlArray) -}}
{{- end -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}
