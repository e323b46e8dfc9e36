"""Values the chart must refuse at `helm install`, each with its own message naming the value
and the fix (the webhook, the operator or the API server would refuse them later, or worse)."""

from __future__ import annotations

import pytest

from harness.helm import BUCKET, refused

pytestmark = pytest.mark.chart

# (id, --set arguments, the key the message must name, and what it must say: the fix where the
# chart's own checks refuse, the value given where values.schema.json does; never the wording
# of Helm's schema validator, which changes between Helm versions).
# A vLLM release that passes every check but the one a case is about.
VLLM = ["serving.engine=vllm", "vllm.model=/data/m", "vllm.apiKey.secretName=k"]
LONG = "a" * 64

CASES = [
    ("misspelled key", ["ray.worker.tpuu=1"], "ray.worker", "tpuu"),
    (
        "a RayJob without the job's arguments",
        ["ray.job.enabled=true"],
        "ray.job.args",
        "--set-json 'ray.job.args=[",
    ),
    (
        "a newline pasted into a RayJob's argument",
        ["--set", "ray.job.enabled=true", "--set-json", 'ray.job.args=["base.yml","steps=5\\n"]'],
        "ray.job.args",
        'argument 1, "steps=5\\n", holds a control character',
    ),
    (
        # KubeRay names the job's cluster <RayJob>-<5 characters>; 40 is the cluster's limit.
        "a RayJob name its cluster's name would make too long",
        ["ray.job.enabled=true", "ray.job.args={base.yml}", f"ray.fullnameOverride={'j' * 35}"],
        "ray.fullnameOverride",
        "--set ray.fullnameOverride=<name of at most 34>",
    ),
    (
        # The image of one framework under the other's jobs: each stops on the head.
        "a MaxText image's tag for PyTorch jobs",
        ["ray.framework=torch", "ray.image.tag=0.1.0-3f2a9c1b7e0d"],
        "ray.image.tag",
        "the torch image's tag ends in -torch",
    ),
    (
        "a PyTorch image's tag for MaxText jobs",
        ["ray.image.tag=0.1.0-3f2a9c1b7e0d-torch"],
        "ray.image.tag",
        "set ray.framework=torch to run PyTorch jobs",
    ),
    ("unknown framework", ["ray.framework=pytorch"], "ray.framework", "torch"),
    (
        "reservation without its name",
        ["ray.worker.tpu.capacity=reservation"],
        "ray.worker.tpu.reservation",
        "--set ray.worker.tpu.reservation=<name>",
    ),
    (
        # GKE's "About flex-start provisioning mode": TPU v3 and v4 are not offered.
        "flex-start on TPU v4",
        ["ray.worker.tpu.type=v4-16", "ray.worker.tpu.capacity=flex-start"],
        "ray.worker.tpu.capacity",
        "GKE offers no flex-start for TPU v4; --set ray.worker.tpu.capacity=spot",
    ),
    (
        "a reservation named for spot capacity",
        ["vllm.tpu.capacity=spot", "vllm.tpu.reservation=r1", *VLLM],
        "vllm.tpu.reservation",
        "--set vllm.tpu.capacity=reservation",
    ),
    (  # values.schema.json lists the capacities
        "unknown capacity",
        ["ray.worker.tpu.capacity=preemptible"],
        "ray.worker.tpu.capacity",
        "flex-start",
    ),
    (
        "no bucket",
        ["global.gcsfuse.bucketName="],
        "global.gcsfuse.bucketName",
        "--set global.gcsfuse.bucketName=<bucket>",
    ),
    (
        "bucket with gs://",
        ["global.gcsfuse.bucketName=gs://b"],
        "global.gcsfuse.bucketName",
        "gs://b",
    ),
    (
        "unknown slice name",
        ["ray.worker.tpu.type=v6e-20"],
        "ray.worker.tpu.type",
        "did you mean v6e-16 or v6e-32? (--set ray.worker.tpu.type=v6e-16)",
    ),
    (
        "unknown generation prefix",
        ["ray.worker.tpu.type=tpu9-16"],
        "ray.worker.tpu.type",
        "name a slice as Cloud TPU does: v4-16, v5p-16, v5litepod-32, v6e-16",
    ),
    (
        "slice not named",
        ["ray.worker.tpu.type="],
        "ray.worker.tpu.type",
        "--set ray.worker.tpu.type=v6e-16",
    ),
    (
        "topology not a shape of the name",
        ["ray.worker.tpu.topology=2x4"],
        "ray.worker.tpu.topology",
        "use 4x4, or remove ray.worker.tpu.topology",
    ),
    (
        "generation against the name",
        ["ray.worker.tpu.generation=v5p"],
        "ray.worker.tpu.generation",
        "remove ray.worker.tpu.generation, the type decides it",
    ),
    (
        "hosts do not match topology",
        ["ray.worker.tpu.hostsPerSlice=3"],
        "ray.worker.tpu.hostsPerSlice",
        "--set ray.worker.tpu.hostsPerSlice=4",
    ),
    (
        # values.schema.json's enum, written from the TPU table (ci/schema_enums.py): the
        # validator lists what the value may be
        "long form: unknown generation",
        ["ray.worker.tpu.type=", "ray.worker.tpu.generation=v7z", "ray.worker.tpu.topology=4x4"],
        "ray.worker.tpu.generation",
        "tpu7x",
    ),
    (
        "long form: topology of another generation",
        ["ray.worker.tpu.type=", "ray.worker.tpu.generation=v6e", "ray.worker.tpu.topology=2x2x2"],
        "ray.worker.tpu.topology",
        "use one of 16x16, 1x1, 2x2",
    ),
    (
        "node label of another generation",
        ["ray.worker.tpu.gkeAccelerator=tpu-v5p-slice"],
        "ray.worker.tpu.gkeAccelerator",
        "--set ray.worker.tpu.gkeAccelerator=tpu-v6e-slice",
    ),
    (
        "chips per host no machine has",
        ["ray.worker.tpu.chipsPerHost=8"],
        "ray.worker.tpu.chipsPerHost",
        "--set ray.worker.tpu.chipsPerHost=4",
    ),
    (
        "wrong machine type",
        ["ray.worker.tpu.machineType=ct6e-standard-8t"],
        "ray.worker.tpu.machineType",
        "--set ray.worker.tpu.machineType=ct6e-standard-4t",
    ),
    (
        "single-host slices over DCN",
        ["ray.worker.tpu.type=v6e-8", "ray.worker.tpu.slices=2"],
        "ray.worker.tpu.slices",
        "--set ray.worker.tpu.chipsPerHost=4",
    ),
    (
        "single-host slices with no multi-host form",
        ["ray.worker.tpu.type=v6e-4", "ray.worker.tpu.slices=2"],
        "ray.worker.tpu.slices",
        "--set ray.worker.tpu.slices=1",
    ),
    (
        "worker id the webhook sets",
        ["ray.worker.env[0].name=TPU_WORKER_ID", "ray.worker.env[0].value=0"],
        "ray.worker.env",
        "TPU_WORKER_ID is set by the GKE TPU webhook",
    ),
    (
        "Ironwood process addresses the webhook sets",
        [
            "ray.worker.tpu.type=tpu7x-16",
            "ray.worker.env[0].name=TPU_PROCESS_ADDRESSES",
            "ray.worker.env[0].value=x",
        ],
        "ray.worker.env",
        "TPU_PROCESS_ADDRESSES is set by the GKE TPU webhook",
    ),
    (
        "Ray counting TPU per device",
        [
            "ray.worker.tpu.type=tpu7x-16",
            "ray.worker.env[0].name=RAY_TPU_RESOURCE_PER_CHIP",
            "ray.worker.env[0].value=2",
        ],
        "ray.worker.env",
        "the launcher reserves a host by its chips",
    ),
    (
        "megascale env the webhook sets",
        ["ray.worker.env[0].name=MEGASCALE_COORDINATOR_ADDRESS", "ray.worker.env[0].value=x"],
        "ray.worker.env",
        "remove it from ray.worker.env",
    ),
    ("zero slices", ["ray.worker.tpu.slices=0"], "ray.worker.tpu.slices", "0"),
    (
        "elastic minimum above the slices",
        ["ray.worker.tpu.slices=2", "ray.worker.tpu.minSlices=3"],
        "ray.worker.tpu.minSlices",
        "--set ray.worker.tpu.minSlices=2 (or fewer)",
    ),
    ("elastic minimum of zero", ["ray.worker.tpu.minSlices=0"], "ray.worker.tpu.minSlices", "0"),
    (
        "elastic serving slices",
        ["serving.engine=vllm", "vllm.model=/data/m", "vllm.tpu.minSlices=1"],
        "vllm.tpu.minSlices",
        "only the Ray worker group's slices are elastic",
    ),
    ("topology not NxM", ["ray.worker.tpu.topology=big"], "ray.worker.tpu.topology", "big"),
    (
        "release name too long",
        ["--name-template", "a" * 41],
        "ray.fullnameOverride",
        "--set ray.fullnameOverride=<name of at most 40>",
    ),
    (
        "group name not a DNS label",
        ["ray.worker.groupName=TPU_group"],
        "ray.worker.groupName",
        "TPU_group",
    ),
    (
        "exposed head without auth",
        ["ray.auth.enabled=false", "ray.head.serviceType=LoadBalancer"],
        "ray.auth.enabled",
        "--set ray.auth.enabled=true",
    ),
    ("head service type", ["ray.head.serviceType=Ingress"], "ray.head.serviceType", "ClusterIP"),
    (
        "no service account",
        ["ray.serviceAccount.create=false"],
        "ray.serviceAccount.name",
        "--set ray.serviceAccount.name=<account>",
    ),
    (
        "workload identity not an email",
        ["ray.serviceAccount.gcpServiceAccount=me"],
        "ray.serviceAccount.gcpServiceAccount",
        "me",
    ),
    ("mount path relative", ["global.gcsfuse.mountPath=data"], "global.gcsfuse.mountPath", "data"),
    (
        "second TPU selector",
        ["ray.worker.nodeSelector.cloud\\.google\\.com/gke-tpu-topology=2x2"],
        "ray.worker.nodeSelector",
        "remove it from ray.worker.nodeSelector",
    ),
    (
        "saxml hosts do not match",
        ["serving.engine=saxml", "saxml.modelServer.tpu.hostsPerSlice=4"],
        "saxml.modelServer.tpu.hostsPerSlice",
        "--set saxml.modelServer.tpu.hostsPerSlice=8",
    ),
    (
        "saxml slice unknown",
        ["serving.engine=saxml", "saxml.modelServer.tpu.type=v5litepod-33"],
        "saxml.modelServer.tpu.type",
        "did you mean v5litepod-32 or v5litepod-64?",
    ),
    (
        "saxml without a bucket",
        [
            "serving.engine=saxml",
            "ray.enabled=false",
            "global.gcsfuse.enabled=false",
            "global.gcsfuse.bucketName=",
        ],
        "saxml.stateBucket",
        "--set saxml.stateBucket=<bucket>",
    ),
    (
        "vllm as a Deployment on a multi-host slice",
        [*VLLM, "vllm.tpu.type=v6e-16", "vllm.controller=deployment"],
        "vllm.controller",
        "--set vllm.controller=rayservice",
    ),
    (
        "vllm serve flags on a RayService",
        [*VLLM, "vllm.tpu.type=v6e-16", "vllm.extraArgs={--max-num-seqs=64}"],
        "vllm.extraArgs",
        "move them to vllm.engineKwargs",
    ),
    (
        "vllm engine kwargs the chart sets",
        [*VLLM, "vllm.tpu.type=v6e-16", "vllm.engineKwargs.tensor_parallel_size=4"],
        "vllm.engineKwargs",
        "tensor_parallel_size is the chart's",
    ),
    ("unknown vllm controller", [*VLLM, "vllm.controller=statefulset"], "vllm.controller", "lws"),
    (
        "vllm slices instead of replicas",
        ["serving.engine=vllm", "vllm.model=/data/m", "vllm.tpu.slices=2"],
        "vllm.tpu.slices",
        "--set vllm.replicas=2",
    ),
    (
        "vllm without a model",
        ["serving.engine=vllm"],
        "vllm.model",
        "--set vllm.model=/data/<model directory in the bucket>",
    ),
    (
        "vllm model outside the bucket mount",
        ["serving.engine=vllm", "vllm.model=/models/m"],
        "vllm.model",
        "--set vllm.model=/data/<path in the bucket>",
    ),
    ("vllm model relative", ["serving.engine=vllm", "vllm.model=data/m"], "vllm.model", "data/m"),
    (
        "vllm without the bucket",
        [
            "serving.engine=vllm",
            "vllm.model=/data/m",
            "ray.enabled=false",
            "global.gcsfuse.enabled=false",
            "global.gcsfuse.bucketName=",
        ],
        "global.gcsfuse.enabled",
        "--set global.gcsfuse.enabled=true",
    ),
    (
        "vLLM load balancer naming no clients",
        [*VLLM, "vllm.service.type=LoadBalancer", "vllm.service.internal=false"],
        "vllm.service.loadBalancerSourceRanges",
        "--set vllm.service.loadBalancerSourceRanges={10.0.0.0/8}",
    ),
    # An enum refusal lists the engines there are.
    ("unknown serving engine", ["serving.engine=tgi"], "serving.engine", "vllm"),
    (
        "saxml switch replaced",
        ["saxml.enabled=true"],
        "saxml.enabled",
        "--set serving.engine=saxml",
    ),
    ("bad digest", ["ray.image.digest=latest"], "ray.image.digest", "latest"),
    (
        "registry inside the repository",
        ["ray.image.repository=us-docker.pkg.dev/p/tpu-stack/launcher"],
        "ray.image.repository",
        "--set ray.image.registry=us-docker.pkg.dev --set ray.image.repository=p/tpu-stack/",
    ),
    (
        "external Saxml load balancer naming no clients",
        [
            "serving.engine=saxml",
            "saxml.http.service.type=LoadBalancer",
            "saxml.http.service.internal=false",
        ],
        "saxml.http.service.loadBalancerSourceRanges",
        "Saxml's HTTP server (its /publish loads models) must name the clients it admits",
    ),
    # What the API server would reject after the install started (each names the value given;
    # an `anyOf` failure, whose wording differs between Helm 3 and 4, only the key):
    (
        "memory quantity",
        ["ray.head.resources.requests.memory=16GB"],
        "ray.head.resources.requests.memory",
        "",
    ),
    ("negative cpu", ["ray.worker.resources.limits.cpu=-1"], "ray.worker.resources.limits.cpu", ""),
    ("shm size", ["global.shmSizeLimit=lots"], "global.shmSizeLimit", ""),
    (
        "sidecar memory",
        ["global.gcsfuse.sidecar.memoryLimit=1GB"],
        "global.gcsfuse.sidecar.memoryLimit",
        "1GB",
    ),
    (
        "registry with a scheme",
        ["global.imageRegistry=https://mirror"],
        "global.imageRegistry",
        "https://mirror",
    ),
    ("image tag", ["ray.image.tag=v1 beta"], "ray.image.tag", "v1 beta"),
    (
        "repository in capitals",
        ["ray.image.repository=Repo/Launcher"],
        "ray.image.repository",
        "Repo/Launcher",
    ),
    (
        "service account name",
        ["ray.serviceAccount.name=My_SA"],
        "ray.serviceAccount.name",
        "My_SA",
    ),
    (
        "service account: empty label",
        ["vllm.serviceAccount.name=a..b"],
        "vllm.serviceAccount.name",
        "a..b",
    ),
    ("ray version", ["ray.rayVersion=latest"], "ray.rayVersion", "latest"),
    ("env var name", ["ray.worker.env[0].name=1BAD"], "ray.worker.env.0.name", "1BAD"),
    (
        "node label value",
        ["ray.head.nodeSelector.pool=bad value"],
        "ray.head.nodeSelector.pool",
        "bad value",
    ),
    ("saxml name", ["saxml.fullnameOverride=Sax_1"], "saxml.fullnameOverride", "Sax_1"),
    ("saxml cell", ["saxml.cell=test"], "saxml.cell", "test"),
    ("model server port", ["saxml.modelServer.port=70000"], "saxml.modelServer.port", "65,535"),
    # Closed by default: auth that cannot be switched off from the side, nothing open to all,
    # one identity per part, and the values GKE, GCS or the API server would refuse later.
    (
        "auth mode in the head's env",
        ["ray.head.env[0].name=RAY_AUTH_MODE", "ray.head.env[0].value=disabled"],
        "ray.head.env",
        "RAY_AUTH_MODE would replace what KubeRay sets from ray.auth",
    ),
    (
        "literal token in the workers' env",
        ["ray.worker.env[0].name=RAY_AUTH_TOKEN", "ray.worker.env[0].value=abc"],
        "ray.worker.env",
        "RAY_AUTH_TOKEN would replace what KubeRay sets from ray.auth",
    ),
    (
        "token path in the head's env",
        ["ray.head.env[0].name=RAY_AUTH_TOKEN_PATH", "ray.head.env[0].value=/t"],
        "ray.head.env",
        "RAY_AUTH_TOKEN_PATH would replace",
    ),
    (
        "a Hugging Face token in the workers' env beside its Secret",
        [
            "ray.hfToken.secretName=hf-token",
            "ray.worker.env[0].name=HF_TOKEN",
            "ray.worker.env[0].valueFrom.secretKeyRef.name=other",
            "ray.worker.env[0].valueFrom.secretKeyRef.key=token",
        ],
        "ray.worker.env",
        "container ray-worker: env HF_TOKEN is set twice",
    ),
    (
        "a Secret key Kubernetes would refuse",
        ["ray.hfToken.secretName=hf-token", "ray.hfToken.secretKey=my token"],
        "ray/hfToken/secretKey",
        "my token",
    ),
    (
        "head on a NodePort",
        ["ray.head.serviceType=NodePort"],
        "ray.head.serviceType",
        "NodePort opens GCS (6379), the dashboard (8265) and the client port (10001)",
    ),
    (
        "head load balancer naming no clients",
        ["ray.head.serviceType=LoadBalancer"],
        "ray.head.loadBalancerSourceRanges",
        "a load balancer for the Ray head (internal load balancer) must name the clients",
    ),
    (
        "head load balancer open to all",
        ["ray.head.serviceType=LoadBalancer", "ray.head.loadBalancerSourceRanges={0.0.0.0/0}"],
        "ray.head.loadBalancerSourceRanges",
        "0.0.0.0/0 admits every address",
    ),
    (
        "vLLM load balancer open to all",
        [*VLLM, "vllm.service.type=LoadBalancer", "vllm.service.loadBalancerSourceRanges={::/0}"],
        "vllm.service.loadBalancerSourceRanges",
        "::/0 admits every address",
    ),
    (
        "internal vLLM load balancer naming no clients",
        [*VLLM, "vllm.service.type=LoadBalancer"],
        "vllm.service.loadBalancerSourceRanges",
        "a load balancer for the model (and the TPUs) must name the clients it admits",
    ),
    (
        "Saxml load balancer open to all",
        [
            "serving.engine=saxml",
            "saxml.http.service.type=LoadBalancer",
            "saxml.http.service.loadBalancerSourceRanges={0.0.0.0/0}",
        ],
        "saxml.http.service.loadBalancerSourceRanges",
        "0.0.0.0/0 admits every address, which would open Saxml's HTTP server",
    ),
    (
        "load balancer made external by an annotation",
        [
            "serving.engine=saxml",
            "saxml.http.service.annotations.networking\\.gke\\.io/load-balancer-type=External",
        ],
        "saxml.http.service.annotations",
        "networking.gke.io/load-balancer-type is the chart's (from saxml.http.service.internal)",
    ),
    (
        "legacy load balancer type annotation",
        [*VLLM, "vllm.service.annotations.cloud\\.google\\.com/load-balancer-type=External"],
        "vllm.service.annotations",
        "cloud.google.com/load-balancer-type is the chart's (from vllm.service.internal)",
    ),
    (
        "vLLM without an API key",
        ["serving.engine=vllm", "vllm.model=/data/m"],
        "vllm.apiKey.secretName",
        "kubectl -n default create secret generic tpu-vllm-api-key --from-literal=api-key=",
    ),
    (
        "vLLM key as a literal",
        [*VLLM, "vllm.env[0].name=VLLM_API_KEY", "vllm.env[0].value=k"],
        "vllm.env[0]",
        "VLLM_API_KEY is given as a literal value, a secret in plain values",
    ),
    (
        "vLLM port in extraArgs",
        [*VLLM, "vllm.extraArgs={--port=9000}"],
        "vllm.extraArgs",
        "--port is the chart's (from vllm.containerPort)",
    ),
    (
        "vLLM key in extraArgs",
        [*VLLM, "vllm.extraArgs={--api-key,abc}"],
        "vllm.extraArgs",
        "--api-key is the chart's (from vllm.apiKey)",
    ),
    (
        "Saxml cell in extraArgs",
        ["serving.engine=saxml", "saxml.modelServer.extraArgs={--sax_cell=/sax/x}"],
        "saxml.modelServer.extraArgs",
        "--sax_cell is the chart's (from saxml.cell)",
    ),
    (
        "token Secret name",
        ["ray.auth.existingSecret=My_Token"],
        "ray.auth.existingSecret",
        "My_Token",
    ),
    (
        "Google account the chart cannot annotate",
        [
            "ray.serviceAccount.create=false",
            "ray.serviceAccount.name=trainer",
            "ray.serviceAccount.gcpServiceAccount=trainer@proj-1.iam.gserviceaccount.com",
        ],
        "ray.serviceAccount.gcpServiceAccount",
        "so trainer@proj-1.iam.gserviceaccount.com would be ignored; annotate your account",
    ),
    (
        "no serving account",
        [*VLLM, "vllm.serviceAccount.create=false"],
        "vllm.serviceAccount.name",
        "--set vllm.serviceAccount.name=<account>",
    ),
    (
        "numeric image tag",
        ["--set-json", "ray.image.tag=1.10"],
        "ray.image.tag",
        "1.1 is a number in YAML (1.10 reads as 1.1",
    ),
    (
        "memory in milli-bytes",
        ["ray.worker.resources.limits.memory=512m"],
        "ray.worker.resources.limits.memory",
        "did you mean 512Mi?",
    ),
    (
        "bucket beginning with goog",
        ["global.gcsfuse.bucketName=goog-ckpts"],
        "global.gcsfuse.bucketName",
        'names may not begin with "goog"',
    ),
    (
        "bucket naming google",
        ["global.gcsfuse.bucketName=my-g00gle-ckpts"],
        "global.gcsfuse.bucketName",
        "close misspelling",
    ),
    (
        "bucket name over 63 characters",
        [f"global.gcsfuse.bucketName={LONG}"],
        "global.gcsfuse.bucketName",
        "a name without dots is at most 63 characters (this is 64)",
    ),
    (
        "bucket named as an IP address",
        ["global.gcsfuse.bucketName=192.168.5.4"],
        "global.gcsfuse.bucketName",
        "an IP address in dotted-decimal form",
    ),
    (
        "Saxml state bucket naming google",
        ["serving.engine=saxml", "saxml.stateBucket=google-sax"],
        "saxml.stateBucket",
        'names may not begin with "goog"; --set saxml.stateBucket=',
    ),
    (
        "bucket mounted over the root",
        ["global.gcsfuse.mountPath=/"],
        "global.gcsfuse.mountPath",
        '"/" would hide the container\'s own root filesystem',
    ),
    (
        "bucket mounted over /tmp",
        ["global.gcsfuse.mountPath=/tmp/"],
        "global.gcsfuse.mountPath",
        '"/tmp/" would hide the container\'s own /tmp',
    ),
    (
        "bucket mounted over /dev/shm",
        ["global.gcsfuse.mountPath=/dev/shm"],
        "global.gcsfuse.mountPath",
        '"/dev/shm" would hide',
    ),
    (
        "release name starting with a digit",
        ["--name-template", "1tpu"],
        "release name",
        "must be DNS-1035 labels",
    ),
    (
        "release name with a dot",
        ["--name-template", "tpu.prod"],
        "release name",
        'install it under a name such as "tpu-prod"',
    ),
    (
        "Saxml names past JobSet's budget",
        ["serving.engine=saxml", f"saxml.fullnameOverride={LONG[:40]}"],
        "saxml.fullnameOverride",
        "JobSet names the last model server pod",
    ),
    (
        "webhook's device plugin address",
        ["ray.worker.env[0].name=TPU_DEVICE_PLUGIN_ADDR", "ray.worker.env[0].value=x"],
        "ray.worker.env",
        "TPU_DEVICE_PLUGIN_ADDR is set by the GKE TPU webhook",
    ),
    (
        "network policy client of unknown kind",
        ["networkPolicy.clients[0].pods=x"],
        "networkPolicy.clients.0",
        "pods",
    ),
    (
        "a PodMonitor the closed NetworkPolicy would keep out",
        ["monitoring.enabled=true", "monitoring.kind=PodMonitor"],
        "monitoring.scrapers",
        "--set monitoring.scrapers[0].namespaceSelector.matchLabels",
    ),
    (
        "monitoring a release that serves no metrics",
        ["monitoring.enabled=true", "ray.enabled=false", "serving.engine=saxml"],
        "monitoring.enabled",
        "Saxml's servers serve no Prometheus metrics",
    ),
    (
        "a scrape interval Prometheus cannot read",
        ["monitoring.interval=30sec"],
        "monitoring.interval",
        "30sec",
    ),
    # An enum refusal lists the kinds there are.
    (
        "a scrape object neither managed Prometheus nor the operator reads",
        ["monitoring.kind=ServiceMonitor"],
        "monitoring.kind",
        "'PodMonitoring', 'PodMonitor'",
    ),
    (
        "idle slices given back by a RayJob, whose cluster ends with its job",
        [
            "--set",
            "ray.worker.tpu.releaseIdleAfterSeconds=1800",
            "--set",
            "ray.job.enabled=true",
            "--set-json",
            'ray.job.args=["base.yml","run_name=r"]',
        ],
        "ray.worker.tpu.releaseIdleAfterSeconds",
        "a RayJob's cluster is made for its job",
    ),
    (
        "idle slices given back behind a Kueue queue's admission",
        ["ray.worker.tpu.releaseIdleAfterSeconds=1800", "kueue.queueName=team-a"],
        "ray.worker.tpu.releaseIdleAfterSeconds",
        "Kueue admits a queued RayCluster's slices as one workload",
    ),
    (
        "a quiet period shorter than a job's restart",
        ["ray.worker.tpu.releaseIdleAfterSeconds=30"],
        "ray.worker.tpu.releaseIdleAfterSeconds",
        "minimum",
    ),
    (
        "idle slices given back by a vLLM server",
        ["serving.engine=vllm", "vllm.model=/data/m", "vllm.tpu.releaseIdleAfterSeconds=600"],
        "vllm.tpu.releaseIdleAfterSeconds",
        "only the Ray worker group gives idle slices back",
    ),
    (
        "source range not a CIDR",
        ["saxml.http.service.loadBalancerSourceRanges={everyone}"],
        "saxml.http.service.loadBalancerSourceRanges.0",
        "everyone",
    ),
    (
        "a request above its limit, in other units",
        ["ray.head.resources.requests.cpu=1500m", "ray.head.resources.limits.cpu=1"],
        "ray.head.resources.requests.cpu",
        "1500m is more than its limit 1",
    ),
    (
        "TPU chips the chart would replace unseen",
        ["ray.worker.resources.limits.google\\.com/tpu=8"],
        "ray.worker.resources.limits",
        "google.com/tpu is set by the chart from the slice",
    ),
    (
        "two parts creating one account",
        [*VLLM, "ray.serviceAccount.name=ml", "vllm.serviceAccount.name=ml"],
        "vllm.serviceAccount.name",
        '"ml" is also the account ray.serviceAccount creates',
    ),
    (
        "token auth off with the NetworkPolicy off",
        ["ray.auth.enabled=false", "networkPolicy.enabled=false"],
        "ray.auth.enabled",
        "any pod in the cluster can reach the Ray head's dashboard and client ports",
    ),
    (
        "every address named a client of the head's ports",
        ["--set-json", 'networkPolicy.clients=[{"ipBlock":{"cidr":"0.0.0.0/0"}}]'],
        "networkPolicy.clients[0].ipBlock.cidr",
        "name the CIDRs (203.0.113.0/24) or the pods",
    ),
    (
        "an ipBlock beside a selector in one NetworkPolicy peer",
        [
            "--set-json",
            'networkPolicy.clients=[{"ipBlock":{"cidr":"10.0.0.0/8"},"podSelector":{}}]',
        ],
        "networkPolicy.clients.0",
        "oneOf",
    ),
    (
        "an except outside its ipBlock's cidr",
        [
            "--set-json",
            'monitoring.scrapers=[{"ipBlock":{"cidr":"10.0.0.0/8","except":["11.0.0.0/16"]}}]',
        ],
        "monitoring.scrapers[0].ipBlock.except[0]",
        "is not strictly inside the block's cidr 10.0.0.0/8",
    ),
    (
        # Kueue v0.15.2's RayCluster webhook: "head" is reserved for the head's pod set.
        "a worker group Kueue's webhook refuses",
        ["kueue.queueName=team-a", "ray.worker.groupName=head"],
        "ray.worker.groupName",
        "--set ray.worker.groupName=tpu-group",
    ),
    (
        "a Kueue priority class without a queue",
        ["kueue.priorityClass=high"],
        "kueue.priorityClass",
        "--set kueue.queueName=<LocalQueue>, or drop kueue.priorityClass",
    ),
    (
        "JAX on the CPU of a TPU worker",
        ["ray.worker.env[0].name=JAX_PLATFORMS", "ray.worker.env[0].value=cpu"],
        "ray.worker.env",
        "JAX_PLATFORMS is set on TPU workers by the chart",
    ),
    (
        "the TPU type GKE's device plugin sets",
        ["ray.worker.env[0].name=TPU_ACCELERATOR_TYPE", "ray.worker.env[0].value=v6e-8"],
        "ray.worker.env",
        "TPU_ACCELERATOR_TYPE is set on TPU workers by GKE's TPU device plugin",
    ),
    (
        "a ray start flag the chart sets",
        ["--set-string", "ray.head.rayStartParams.dashboard-port=9999"],
        "ray.head.rayStartParams",
        "dashboard-port is set by the chart",
    ),
    (
        "a Saxml chip of another generation than its slice",
        [
            "serving.engine=saxml",
            "saxml.modelServer.tpu.type=v5litepod-16",
            "saxml.modelServer.platformChip=tpuv6e",
        ],
        "saxml.modelServer.platformChip",
        "--set saxml.modelServer.platformChip=tpuv5e",
    ),
]


def names_key(err: str, key: str) -> bool:
    """The message names the key: `a.b.c:` from the chart's checks, '/a/b/c' from the schema."""
    return f"{key}:" in err or "'/" + key.replace(".", "/") + "'" in err


@pytest.mark.parametrize(("sets", "key", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
@pytest.mark.parametrize("major", [3, 4])
def test_refuses_naming_the_key_and_the_fix(sets, key, says, major):
    flags = sets if sets[0].startswith("--") else [a for s in sets for a in ("--set", s)]
    err = refused(*BUCKET, *flags, major=major)
    assert names_key(err, key), err
    assert says in err, err


def test_every_case_has_its_own_message():
    assert len({(c[2], c[3]) for c in CASES}) == len(CASES) >= 80


def test_all_template_refusals_come_at_once():
    err = refused(
        *BUCKET,
        "--set",
        "ray.worker.tpu.hostsPerSlice=3",
        "--set",
        "ray.head.serviceType=NodePort",
        "--set",
        "ray.serviceAccount.create=false",
    )
    assert err.count("\n  - ") == 3 and "VALUES REFUSED" in err
