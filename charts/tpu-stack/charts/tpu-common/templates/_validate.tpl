{{/*
tpu-common.checkTpu: the GKE TPU webhook's rule and the launcher's TPU table, applied to one
`tpu:` block. Call with (dict "tpu" <block> "path" "ray.worker.tpu" "table" <table>); returns
messages, one per line.
*/}}
{{- define "tpu-common.checkTpu" -}}
{{- $t := .tpu -}}
{{- $p := .path -}}
{{- $gen := get .table (toString $t.generation) -}}
{{- if not $gen -}}
{{ $p }}.generation: unknown TPU generation {{ $t.generation | quote }}; use one of {{ keys .table | sortAlpha | join ", " }} (--set {{ $p }}.generation=v6e).
{{ else -}}
{{- if ne $t.gkeAccelerator $gen.gkeAccelerator -}}
{{ $p }}.gkeAccelerator: {{ $t.gkeAccelerator | quote }} is not the GKE node label of {{ $t.generation }}; nodes carry cloud.google.com/gke-tpu-accelerator={{ $gen.gkeAccelerator }} (--set {{ $p }}.gkeAccelerator={{ $gen.gkeAccelerator }}).
{{ end -}}
{{- $shape := get $gen.topologies (toString $t.topology) -}}
{{- if not $shape -}}
{{ $p }}.topology: {{ $t.topology | quote }} is not a {{ $t.generation }} topology; use one of {{ keys $gen.topologies | sortAlpha | join ", " }}.
{{ else -}}
{{- $host := get $shape.chipsPerHost (toString $t.chipsPerHost) -}}
{{- if not $host -}}
{{ $p }}.chipsPerHost: a {{ $t.generation }} {{ $t.topology }} slice cannot be built from hosts of {{ $t.chipsPerHost }} chips; use {{ keys $shape.chipsPerHost | sortAlpha | join " or " }} (--set {{ $p }}.chipsPerHost={{ keys $shape.chipsPerHost | sortAlpha | first }}).
{{ else -}}
{{- if ne (int $t.hostsPerSlice) (int $host.hosts) -}}
{{ $p }}.hostsPerSlice: {{ $t.hostsPerSlice }} hosts x {{ $t.chipsPerHost }} chips is not the {{ $shape.chips }} chips of topology {{ $t.topology }} (the GKE TPU webhook would reject the RayCluster); use --set {{ $p }}.hostsPerSlice={{ $host.hosts }}.
{{ end -}}
{{- if ne (toString $t.machineType) $host.machineType -}}
{{ $p }}.machineType: {{ $t.machineType | quote }} does not hold {{ $t.chipsPerHost }} {{ $t.generation }} chips; use --set {{ $p }}.machineType={{ $host.machineType }}.
{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
