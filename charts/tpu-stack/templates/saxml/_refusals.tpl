{{/* tpu-stack.refusals.saxml: Saxml serving. A YAML list of messages; call with the root context. */}}
{{- define "tpu-stack.refusals.saxml" -}}
{{- $msgs := list -}}
{{- $g := .Values.global -}}
{{- if .Values.saxml.enabled -}}
{{- $msgs = append $msgs "saxml.enabled: replaced by serving.engine, which names the one engine a release serves with; --set serving.engine=saxml (and drop saxml.enabled)." -}}
{{- end -}}
{{- if eq .Values.serving.engine "saxml" -}}
{{- $s := .Values.saxml -}}
{{- if not (or $s.stateBucket $g.gcsfuse.bucketName) -}}
{{- $msgs = append $msgs "saxml.stateBucket: the admin server keeps its state in a bucket; --set saxml.stateBucket=<bucket> (or global.gcsfuse.bucketName)." -}}
{{- end -}}
{{- $slice := include "tpu-stack.slice" (dict "tpu" $s.modelServer.tpu "path" "saxml.modelServer.tpu" "ctx" $) | fromYaml -}}
{{- $msgs = concat $msgs $slice.errors -}}
{{- if $s.modelServer.tpu.releaseIdleAfterSeconds -}}
{{- $msgs = append $msgs "saxml.modelServer.tpu.releaseIdleAfterSeconds: only the Ray worker group gives idle slices back; drop it." -}}
{{- end -}}
{{- if $s.modelServer.tpu.minSlices -}}
{{- $msgs = append $msgs "saxml.modelServer.tpu.minSlices: only the Ray worker group's slices are elastic (training); Saxml serves on every slice of its JobSet; drop saxml.modelServer.tpu.minSlices." -}}
{{- end -}}
{{- $msgs = concat $msgs (include "tpu-stack.serviceErrors" (dict "key" "saxml.http.service" "service" $s.http.service "what" "Saxml's HTTP server (its /publish loads models)") | fromYamlArray) -}}
{{- $msgs = concat $msgs (include "tpu-stack.flagErrors" (dict "key" "saxml.modelServer.extraArgs" "args" $s.modelServer.extraArgs "owned" (dict "--port" "saxml.modelServer.port" "--sax_cell" "saxml.cell" "--platform_chip" "saxml.modelServer.platformChip")) | fromYamlArray) -}}
{{- $msgs = concat $msgs (include "tpu-stack.pathErrors" (dict "key" "saxml.rootPrefix" "path" $s.rootPrefix) | fromYamlArray) -}}
{{- /* Saxml names a chip tpu<generation> (tpuv4, tpuv5e): one that names another generation of
the TPU table than the slice's would compile for the wrong chip. */ -}}
{{- $chipGen := trimPrefix "tpu" (toString $s.modelServer.platformChip) -}}
{{- if and (not $slice.errors) (hasKey (include "tpu-stack.tpuTable" $ | fromJson).generations $chipGen) (ne $chipGen $slice.generation) -}}
{{- $msgs = append $msgs (printf "saxml.modelServer.platformChip: %s is a %s chip, but the model servers run on %s (a %s slice); --set saxml.modelServer.platformChip=tpu%s." (toString $s.modelServer.platformChip) $chipGen $slice.name $slice.generation $slice.generation) -}}
{{- end -}}
{{- /* JobSet's webhook refuses a JobSet whose longest pod name passes 63 characters. */ -}}
{{- if not $slice.errors -}}
{{- $pod := printf "%s-model-server-%d-%d-abcde" (include "tpu-stack.saxmlComponentName" (dict "ctx" . "component" "model")) (sub (int $slice.slices) 1) (sub (int $slice.hosts) 1) -}}
{{- if gt (len $pod) 63 -}}
{{- $msgs = append $msgs (printf "saxml.fullnameOverride: JobSet names the last model server pod %s (with its 5-character suffix), %d characters; a pod name allows 63; use a release name %d characters shorter or --set saxml.fullnameOverride=<shorter name>." $pod (len $pod) (sub (len $pod) 63)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $msgs -}}
{{- end -}}
