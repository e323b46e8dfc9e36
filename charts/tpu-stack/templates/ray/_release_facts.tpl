{{/*
tpu-stack.releaseFacts: what the release tells the jobs it runs, as one JSON, on every Ray pod
of the release (LAUNCHER_RELEASE): launcher.core.release_facts.ReleaseFacts reads every field
back, and launcher.core.values_file.release_facts reads the same from values files (a test holds
the two equal). A new fact is one field here and one there. Call with (dict "ctx" $ "slice"
<the resolved ray.worker.tpu slice, or nil: a release without TPUs>).
*/}}
{{- define "tpu-stack.releaseFacts" -}}
{{- $v := .ctx.Values -}}
{{- $w := $v.ray.worker -}}
{{- $s := .slice -}}
{{- $tier := $v.checkpoints.tier -}}
{{- $facts := dict "version" 1 "checkpoint_tier" $tier "grace_seconds" $w.terminationGracePeriodSeconds "region" (default "" $v.cost.region) "prices" (default dict $v.cost.pricesPerChipHour) "slices" nil "cpu_slice" nil "capacities" (list) "min_slices" nil "memory_volume" nil "memory_limit" nil "bucket" nil "idle_release" nil -}}
{{- with dig "limits" "memory" "" (default dict $w.resources) -}}
{{- $_ := set $facts "memory_limit" (toString .) -}}
{{- end -}}
{{- if $v.global.gcsfuse.enabled -}}
{{- $_ := set $facts "bucket" (dict "bucket" $v.global.gcsfuse.bucketName "mount" $v.global.gcsfuse.mountPath) -}}
{{- end -}}
{{- if $s -}}
{{- $_ := set $facts "slices" (dict "generation" $s.generation "topology" $s.topology "chips_per_host" $s.chipsPerHost "slices" $s.slices) -}}
{{- with $s.capacityWords }}{{ $_ := set $facts "capacities" (splitList "," .) }}{{ end -}}
{{- with $w.tpu.minSlices }}{{ $_ := set $facts "min_slices" . }}{{ end -}}
{{- if and (eq $tier "memory") $v.checkpoints.memorySize -}}
{{- $_ := set $facts "memory_volume" (toString $v.checkpoints.memorySize) -}}
{{- end -}}
{{- with $w.tpu.releaseIdleAfterSeconds -}}
{{- $_ := set $facts "idle_release" (dict "cluster" (include "tpu-stack.rayClusterName" $.ctx) "group" $w.groupName "after_s" .) -}}
{{- end -}}
{{- else -}}
{{- $_ := set $facts "cpu_slice" (dict "hosts" $w.cpu.hosts "devices_per_host" $w.cpu.devicesPerHost) -}}
{{- end -}}
{{- toJson $facts -}}
{{- end -}}
