{{/* tpu-stack.saxmlRoot: the gs:// root where the admin server keeps its state and servers find it. */}}
{{- define "tpu-stack.saxmlRoot" -}}
{{- printf "gs://%s/%s" (default .Values.global.gcsfuse.bucketName .Values.saxml.stateBucket) (trimPrefix "/" .Values.saxml.rootPrefix) -}}
{{- end -}}

{{/* tpu-stack.saxmlComponentName: <saxml name>-<component>. */}}
{{- define "tpu-stack.saxmlComponentName" -}}
{{- printf "%s-%s" (include "tpu-stack.saxmlName" .ctx) .component -}}
{{- end -}}

{{/* tpu-stack.saxmlContainerSecurity: containers run without privilege unless a TPU generation needs it. */}}
{{- define "tpu-stack.saxmlContainerSecurity" -}}
allowPrivilegeEscalation: {{ .privileged | default false }}
{{- if .privileged }}
privileged: true
{{- end }}
{{- end -}}
