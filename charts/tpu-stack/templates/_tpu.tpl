{{/*
TPU slices from the launcher's TPU table (files/tpu-table.json, exported by `tpu-launcher
tpu-table --json` and checked for drift by a test): a `tpu:` block names its slice as Cloud TPU
does (`type: v6e-16`) and everything else is derived here, once, for every template.
*/}}

{{/* tpu-stack.tpuTable: the table, parsed. */}}
{{- define "tpu-stack.tpuTable" -}}
{{- .Files.Get "files/tpu-table.json" -}}
{{- end -}}

{{/*
tpu-stack.slice: one `tpu:` block resolved against the table. The slice is the one `type` names
(v6e-16, v5p-16, v5litepod-32), or, in the long form without `type`, `generation` + `topology`.
`topology` and `chipsPerHost` choose where a name allows more than one shape (v6e-8: one host of
8 chips by default, or two of 4); `generation`, `gkeAccelerator`, `machineType` and
`hostsPerSlice` are derived and, when set, must agree (the GKE TPU webhook rejects a RayCluster
whose hosts x chips is not the topology). Call with (dict "tpu" <block> "path" "ray.worker.tpu"
"ctx" $); returns YAML: name, generation, gkeAccelerator, topology, chips, chipsPerHost,
devicesPerHost (JAX devices: two per chip on tpu7x), hosts, machineType, slices, and errors (one message per problem, each naming the key and the fix).
*/}}
{{- define "tpu-stack.slice" -}}
{{- $t := .tpu -}}
{{- $p := .path -}}
{{- $table := include "tpu-stack.tpuTable" .ctx | fromJson -}}
{{- $errs := list -}}
{{- $out := dict "slices" (int (default 1 $t.slices)) -}}
{{- $gen := "" -}}
{{- $topos := list -}}
{{- $type := toString (default "" $t.type) | trim | lower -}}
{{- if $type -}}
  {{- $entry := get $table.names $type -}}
  {{- if $entry -}}
    {{- $gen = $entry.generation -}}
    {{- $topos = $entry.topologies -}}
    {{- if and $t.generation (ne (toString $t.generation) $gen) -}}
      {{- $errs = append $errs (printf "%s.generation: %q is not the generation of type %s (a %s slice); remove %s.generation, the type decides it." $p (toString $t.generation) $t.type $gen $p) -}}
    {{- end -}}
  {{- else -}}
    {{- $errs = append $errs (printf "%s.type: unknown TPU type %q; %s" $p (toString $t.type) (include "tpu-stack.closestNames" (dict "name" $type "table" $table "path" $p))) -}}
  {{- end -}}
{{- else if $t.generation -}}
  {{- $gen = toString $t.generation -}}
  {{- if not (hasKey $table.generations $gen) -}}
    {{- $errs = append $errs (printf "%s.generation: unknown TPU generation %q; name the slice instead: --set %s.type=v6e-16 (generations: %s)." $p $gen $p (keys $table.generations | sortAlpha | join ", ")) -}}
    {{- $gen = "" -}}
  {{- else if not $t.topology -}}
    {{- $errs = append $errs (printf "%s.topology: the long form (generation without type) needs a topology; --set %s.type=<name> instead, e.g. %s." $p $p (index (get $table.namesByPrefix $gen) 0)) -}}
    {{- $gen = "" -}}
  {{- else -}}
    {{- $topos = keys (get $table.generations $gen).topologies | sortAlpha -}}
  {{- end -}}
{{- else -}}
  {{- $errs = append $errs (printf "%s.type: the slice is not named; --set %s.type=v6e-16 (any name of `tpu-launcher tpu-table`)." $p $p) -}}
{{- end -}}
{{- if $gen -}}
  {{- $g := get $table.generations $gen -}}
  {{- $topo := toString (default (first $topos) $t.topology) -}}
  {{- if not (has $topo $topos) -}}
    {{- if $type -}}
      {{- $errs = append $errs (printf "%s.topology: %q is not a shape of %s; use %s, or remove %s.topology." $p $topo $t.type (join " or " $topos) $p) -}}
    {{- else -}}
      {{- $errs = append $errs (printf "%s.topology: %q is not a %s topology; use one of %s." $p $topo $gen (join ", " $topos)) -}}
    {{- end -}}
  {{- else -}}
    {{- $shape := get $g.topologies $topo -}}
    {{- $cph := int (default $shape.defaultChipsPerHost $t.chipsPerHost) -}}
    {{- $host := get $shape.chipsPerHost (toString $cph) -}}
    {{- $sizes := keys $shape.chipsPerHost | sortAlpha -}}
    {{- if not $host -}}
      {{- $errs = append $errs (printf "%s.chipsPerHost: a %s %s slice cannot be built from hosts of %d chips; use %s (--set %s.chipsPerHost=%s)." $p $gen $topo $cph (join " or " $sizes) $p (first $sizes)) -}}
    {{- else -}}
      {{- if and $t.hostsPerSlice (ne (int $t.hostsPerSlice) (int $host.hosts)) -}}
        {{- $errs = append $errs (printf "%s.hostsPerSlice: %v hosts x %d chips is not the %v chips of topology %s (the GKE TPU webhook would reject the RayCluster); remove %s.hostsPerSlice or --set %s.hostsPerSlice=%v." $p $t.hostsPerSlice $cph $shape.chips $topo $p $p $host.hosts) -}}
      {{- end -}}
      {{- if and $t.machineType (ne (toString $t.machineType) $host.machineType) -}}
        {{- $errs = append $errs (printf "%s.machineType: %q does not hold %d %s chips; remove %s.machineType or --set %s.machineType=%s." $p (toString $t.machineType) $cph $gen $p $p $host.machineType) -}}
      {{- end -}}
      {{- if and $t.gkeAccelerator (ne (toString $t.gkeAccelerator) $g.gkeAccelerator) -}}
        {{- $errs = append $errs (printf "%s.gkeAccelerator: %q is not the GKE node label of %s; nodes carry cloud.google.com/gke-tpu-accelerator=%s; remove %s.gkeAccelerator or --set %s.gkeAccelerator=%s." $p (toString $t.gkeAccelerator) $gen $g.gkeAccelerator $p $p $g.gkeAccelerator) -}}
      {{- end -}}
      {{- $name := "" -}}
      {{- range $n, $e := $table.names -}}
        {{- if and (eq $e.generation $gen) (has $topo $e.topologies) (eq $n $e.canonical) -}}
          {{- $name = $n -}}
        {{- end -}}
      {{- end -}}
      {{- $_ := merge $out (dict "name" $name "generation" $gen "gkeAccelerator" $g.gkeAccelerator "topology" $topo "chips" (int $shape.chips) "chipsPerHost" $cph "devicesPerHost" (mul $cph (int $g.devicesPerChip)) "hosts" (int $host.hosts) "machineType" $host.machineType "rayAcceleratorType" $g.rayAcceleratorType "devices" (mul (int $shape.chips) (int $g.devicesPerChip))) -}}
    {{- end -}}
  {{- end -}}
{{- end -}}
{{- /* How the TPUs are obtained: each capacity item's node labels and tolerations, from the
table. `capacity` is one word or an ordered list of them (a fallback: launcher.core.tpu.capacity,
capacity_items); `reservation:NAME` names an item's own reservation. */ -}}
{{- $fb := $table.capacityFallback -}}
{{- $words := list -}}
{{- if kindIs "slice" $t.capacity -}}
  {{- $words = $t.capacity -}}
{{- else -}}
  {{- $words = list (toString (default "on-demand" $t.capacity)) -}}
{{- end -}}
{{- /* The Ray workers wait in the release's Kueue queue, if it names one. */ -}}
{{- $queue := and (eq $p "ray.worker.tpu") .ctx.Values.kueue.queueName -}}
{{- $items := list -}}
{{- $bare := false -}}
{{- range $word := $words -}}
  {{- $word = toString $word -}}
  {{- $cap := $word -}}
  {{- $res := "" -}}
  {{- if regexMatch (printf "^%s$" $fb.itemPattern) $word -}}
    {{- $cap = "reservation" -}}
    {{- $res = trimPrefix "reservation:" $word -}}
  {{- else if eq $word "reservation" -}}
    {{- $bare = true -}}
    {{- $res = toString (default "" $t.reservation) -}}
  {{- end -}}
  {{- $capacity := get $table.capacities $cap -}}
  {{- if not $capacity -}}
    {{- $errs = append $errs (printf "%s.capacity: unknown capacity %q; one of %s (--set %s.capacity=spot)." $p $cap (keys $table.capacities | sortAlpha | join ", ") $p) -}}
  {{- else if and (eq $cap "reservation") (not $res) -}}
    {{- $errs = append $errs (printf "%s.reservation: capacity: reservation names no reservation; --set %s.reservation=<name> (gcloud compute reservations list)." $p $p) -}}
  {{- else if and (eq $cap "flex-start") $gen (not (get (get $table.generations $gen) "flexStart")) -}}
    {{- $errs = append $errs (printf "%s.capacity: GKE offers no flex-start for TPU %s; --set %s.capacity=spot (or on-demand, or a reservation)." $p $gen $p) -}}
  {{- else -}}
    {{- /* Flex-start under a Kueue queue is GKE's queued provisioning (its ProvisioningRequest
    check, `tpu-launcher gke queue`): the nodes are labelled and tainted gke-queued instead
    (launcher.core.tpu.capacity.QUEUED_FLEX_START). The queue holds the Ray part's workers. */ -}}
    {{- if and (eq $cap "flex-start") $queue -}}
      {{- $capacity = $table.queuedProvisioning -}}
    {{- end -}}
    {{- $labels := dict -}}
    {{- /* A shared reservation (projects/OWNER/reservations/NAME): the name, and its owner in
    a label of its own (launcher.core.tpu.capacity.Capacity.labels_for). */ -}}
    {{- $reservation := $res -}}
    {{- $shared := $table.sharedReservation -}}
    {{- $owner := "" -}}
    {{- if regexMatch (printf "^%s$" $shared.pattern) $reservation -}}
      {{- $owner = index (splitList "/" $reservation) 1 -}}
      {{- $reservation = index (splitList "/" $reservation) 3 -}}
    {{- end -}}
    {{- range $k, $v := $capacity.nodeSelector -}}
      {{- $_ := set $labels $k (replace "{reservation}" $reservation $v) -}}
      {{- if and $owner (contains "{reservation}" $v) -}}
        {{- $_ := set $labels $shared.projectLabel $owner -}}
      {{- end -}}
    {{- end -}}
    {{- $items = append $items (dict "word" (ternary (printf "reservation:%s" $res) $cap (eq $cap "reservation")) "capacity" $cap "nodeSelector" $labels "tolerations" (default list $capacity.tolerations)) -}}
  {{- end -}}
{{- end -}}
{{- if and $t.reservation (not $bare) -}}
  {{- $errs = append $errs (printf "%s.reservation: %q is set but capacity is %s; --set %s.capacity=reservation, or remove the reservation." $p (toString $t.reservation) (join ", " $words) $p) -}}
{{- end -}}
{{- if ne (len $words) (len (uniq $words)) -}}
  {{- $errs = append $errs (printf "%s.capacity: %s names one item twice; name each capacity once, in the order to try them." $p (join ", " $words)) -}}
{{- end -}}
{{- $fallback := toString (default "" $t.capacityFallback) -}}
{{- if and (eq (len $items) (len $words)) (eq (len $items) 1) -}}
  {{- $item := first $items -}}
  {{- $_ := merge $out (dict "capacity" $item.capacity "capacityNodeSelector" $item.nodeSelector "capacityTolerations" $item.tolerations "capacityWords" $item.word "capacityEnv" $fb.env) -}}
{{- else if eq (len $items) (len $words) -}}
  {{- /* A fallback: Kueue's flavors (the pods select no capacity; Kueue adds the admitting
  flavor's labels) or GKE's ComputeClass (the pods select the class). */ -}}
  {{- if not $fallback -}}
    {{- $fallback = ternary "kueue" "computeclass" (not (empty $queue)) -}}
  {{- end -}}
  {{- $tolerations := list -}}
  {{- $selector := dict -}}
  {{- $itemWords := list -}}
  {{- range $items -}}
    {{- $itemWords = append $itemWords .word -}}
    {{- range .tolerations -}}
      {{- if not (has . $tolerations) -}}{{- $tolerations = append $tolerations . -}}{{- end -}}
    {{- end -}}
  {{- end -}}
  {{- if eq $fallback "kueue" -}}
    {{- /* Kueue adds the admitting flavor's labels and tolerations to the pods: tolerating
    every item's taint here would let a job admitted on-demand land on Spot nodes. */ -}}
    {{- $tolerations = list -}}
    {{- if not $queue -}}
      {{- $errs = append $errs (printf "%s.capacityFallback: kueue walks the list with a Kueue queue's flavors, and only the Ray workers wait in one; --set kueue.queueName=<LocalQueue> (tpu-launcher gke queue makes it), or --set %s.capacityFallback=computeclass." $p $p) -}}
    {{- end -}}
  {{- else -}}
    {{- range $items -}}
      {{- if eq .capacity "flex-start" -}}
        {{- $errs = append $errs (printf "%s.capacity: flex-start in a ComputeClass fallback is not offered here (GKE's ComputeClass reference, as read for this chart, has no flex-start rule for TPU slices); put flex-start last under a Kueue queue (--set kueue.queueName=<LocalQueue>, %s.capacityFallback=kueue), or drop it." $p $p) -}}
      {{- end -}}
    {{- end -}}
    {{- $class := printf "%s-%s-%s" .ctx.Release.Namespace .ctx.Release.Name (index (splitList "." $p) 0) | trunc 63 | trimSuffix "-" -}}
    {{- $_ := set $selector $fb.computeClassLabel $class -}}
    {{- $tolerations = append $tolerations (dict "key" $fb.computeClassLabel "operator" "Equal" "value" $class "effect" "NoSchedule") -}}
    {{- $_ := set $out "computeClass" $class -}}
  {{- end -}}
  {{- $_ := merge $out (dict "capacity" (first $items).capacity "capacityFallback" $fallback "capacityNodeSelector" $selector "capacityTolerations" $tolerations "capacityWords" (join "," $itemWords) "capacityEnv" $fb.env) -}}
{{- end -}}
{{- $_ := set $out "errors" $errs -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
tpu-stack.closestNames: what to say about an unknown name: its neighbours in the same generation
(v6e-20 -> v6e-16 or v6e-32), the launcher's rule (launcher.core.tpu.table.closest_names) over
the same lists. Call with (dict "name" <lowercased name> "table" <table> "path" <key>).
*/}}
{{- define "tpu-stack.closestNames" -}}
{{- $prefix := regexReplaceAll "-[^-]*$" .name "" -}}
{{- $count := regexFind "[^-]*$" .name -}}
{{- $names := get .table.namesByPrefix $prefix -}}
{{- $close := list -}}
{{- if and $names (regexMatch "^[0-9]+$" $count) -}}
  {{- $below := list -}}
  {{- $above := list -}}
  {{- range $names -}}
    {{- $n := regexFind "[0-9]+$" . | atoi -}}
    {{- if lt $n (atoi $count) }}{{ $below = list . }}{{ end -}}
    {{- if and (gt $n (atoi $count)) (not $above) }}{{ $above = list . }}{{ end -}}
  {{- end -}}
  {{- $close = concat $below $above -}}
{{- else if $names -}}
  {{- $close = slice $names 0 (min 4 (len $names)) -}}
{{- end -}}
{{- if $close -}}
did you mean {{ join " or " $close }}? (--set {{ .path }}.type={{ first $close }})
{{- else -}}
{{ .table.unknownNameFix }}.
{{- end -}}
{{- end -}}

{{/* tpu-stack.capacityLabels: every node label a capacity (or a ComputeClass fallback) puts in
a slice's node selector, from the TPU table: a YAML list. */}}
{{- define "tpu-stack.capacityLabels" -}}
{{- $table := include "tpu-stack.tpuTable" . | fromJson -}}
{{- $labels := list $table.capacityFallback.computeClassLabel -}}
{{- range $capacity := $table.capacities }}{{ $labels = concat $labels (keys $capacity.nodeSelector) }}{{ end -}}
{{- toYaml ($labels | uniq | sortAlpha) -}}
{{- end -}}

{{/* tpu-stack.tpuNodeSelector: the GKE node labels a slice of this shape lands on; call with a
resolved slice. */}}
{{- define "tpu-stack.tpuNodeSelector" -}}
cloud.google.com/gke-tpu-accelerator: {{ .gkeAccelerator }}
cloud.google.com/gke-tpu-topology: {{ .topology }}
{{- with .capacityNodeSelector }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* tpu-stack.capacityEnv: what a slice's host is told of its capacity: the item, or the
fallback's items in order and its node's name to read which one it got (TPU_CAPACITY,
launcher.core.tpu.capacity.CAPACITY_ENV); `gke plan` reads a fallback's from the render. The Ray
workers get it always (a notice's meaning depends on it); vLLM's and Saxml's with a fallback. */}}
{{- define "tpu-stack.capacityEnv" -}}
{{- if .capacityEnv -}}
- name: {{ .capacityEnv }}
  value: {{ .capacityWords | quote }}
{{- if .capacityFallback }}
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
{{- end }}
{{- end -}}
{{- end -}}

{{/* tpu-stack.tpuTolerations: what a slice's pods tolerate for its capacity (a Spot pool's
taint) and the pods' own; call with (dict "tpu" <resolved slice> "extra" <list>). */}}
{{- define "tpu-stack.tpuTolerations" -}}
{{- $all := concat (default list .tpu.capacityTolerations) (default list .extra) -}}
{{- with $all }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
tpu-stack.webhookWarning: what the cluster lacks of the KubeRay TPU webhook, read at install
with `lookup` (empty offline, as under `helm template`, and when all is well). The webhook sets
each multi-host TPU worker's TPU_WORKER_* and MEGASCALE_* env; with KubeRay >= 1.6 (multi-host
indexing on by default) webhooks before v1.3.2 add a pod affinity on a `replicaIndex` label no
pod carries, so every multi-host worker stays Pending.
*/}}
{{- define "tpu-stack.webhookWarning" -}}
{{- $fix := "On GKE enable the Ray operator add-on, which installs it (`tpu-launcher gke plan` prints the command); elsewhere install kuberay-tpu-webhook v1.3.2 or newer." -}}
{{- if lookup "v1" "Namespace" "" "kube-system" -}}
{{- $hook := lookup "admissionregistration.k8s.io/v1" "MutatingWebhookConfiguration" "" "kuberay-tpu-mutating-webhook-cfg" -}}
{{- if not $hook -}}
WARNING: this cluster has no KubeRay TPU webhook (MutatingWebhookConfiguration kuberay-tpu-mutating-webhook-cfg): multi-host TPU workers will get no TPU_WORKER_HOSTNAMES and cannot form a slice. {{ $fix }}
{{- else -}}
{{- $service := (first $hook.webhooks).clientConfig.service | default dict -}}
{{- $version := "" -}}
{{- if $service.namespace -}}
{{- range (lookup "apps/v1" "Deployment" $service.namespace "").items -}}
{{- range .spec.template.spec.containers -}}
{{- if contains "tpu-webhook" .image -}}
{{- $version = regexFind "[0-9]+[.][0-9]+[.][0-9]+" (regexFind ":[^:@]+" .image) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $version -}}
NOTE: the KubeRay TPU webhook's version could not be read from its Deployment; it must be v1.3.2 or newer (older ones leave multi-host workers Pending with KubeRay >= 1.6).
{{- else if semverCompare "<1.3.2" $version -}}
WARNING: the KubeRay TPU webhook is v{{ $version }}; with KubeRay >= 1.6 versions before v1.3.2 add a pod affinity on a `replicaIndex` label no pod carries, and every multi-host worker stays Pending. Upgrade it to v1.3.2 or newer.
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* tpu-stack.standingCost: what the release's TPU slices cost an hour while they are up, at
the price launcher.core.tpu.prices.price_of gives a job (the same order: cost.pricesPerChipHour
for the region, then for any region, then the table's dated list price, a reservation billed as
on-demand). Call with (dict "slice" <resolved slice> "ctx" $). */}}
{{- define "tpu-stack.standingCost" -}}
{{- $s := .slice -}}
{{- $cost := .ctx.Values.cost -}}
{{- $prices := (include "tpu-stack.tpuTable" .ctx | fromJson).prices -}}
{{- $given := get (default dict $cost.pricesPerChipHour) $s.generation | default dict -}}
{{- $keys := list $s.capacity -}}
{{- if $cost.region }}{{ $keys = prepend $keys (printf "%s/%s" $cost.region $s.capacity) }}{{ end -}}
{{- $found := dict -}}
{{- range $keys -}}
{{- if and (not $found.price) (hasKey $given .) -}}
{{- $_ := set $found "price" (printf "%v" (get $given .)) -}}
{{- $_ := set $found "source" (printf "the release's cost.pricesPerChipHour for %s %s" $s.generation .) -}}
{{- end -}}
{{- end -}}
{{- if not $found.price -}}
{{- $billed := ternary "on-demand" $s.capacity (eq $s.capacity "reservation") -}}
{{- $listed := get (get $prices.usdPerChipHour $s.generation | default dict) $billed -}}
{{- if ne (toString $listed) "" -}}
{{- $_ := set $found "price" (printf "%v" $listed) -}}
{{- $_ := set $found "source" (printf "list price for %s %s%s, %s, %s" $s.generation $s.capacity (ternary ", billed as on-demand" "" (eq $s.capacity "reservation")) $prices.asOf $prices.source) -}}
{{- end -}}
{{- end -}}
{{- $chips := mul $s.chips $s.slices -}}
{{- if $found.price -}}
Cost: {{ $chips }} chips x ${{ printf "%.2f" (float64 $found.price) }} per chip-hour = ${{ printf "%.2f" (mulf (float64 $found.price) $chips) }} an hour while the slices are up ({{ $found.source }}); a job's summary and `tpu-launcher status` give its own.
{{- else -}}
Cost: not known: no price for {{ $s.generation }} {{ $s.capacity }} in the launcher's table (`tpu-launcher tpu-table --prices`); set cost.pricesPerChipHour.{{ $s.generation }}.{{ $s.capacity }} for it.
{{- end -}}
{{- end -}}
