{{/* saxml.root: the gs:// root where the admin server keeps its state and servers find it. */}}
{{- define "saxml.root" -}}
{{- printf "gs://%s/%s" (default .Values.global.gcsfuse.bucketName .Values.stateBucket) (trimPrefix "/" .Values.rootPrefix) -}}
{{- end -}}

{{/* saxml.componentName: <fullname>-<component>. */}}
{{- define "saxml.componentName" -}}
{{- printf "%s-%s" (include "tpu-common.fullname" .ctx) .component -}}
{{- end -}}

{{/* saxml.podSecurity: containers run without privilege unless a TPU generation needs it. */}}
{{- define "saxml.containerSecurity" -}}
allowPrivilegeEscalation: {{ .privileged | default false }}
{{- if .privileged }}
privileged: true
{{- end }}
{{- end -}}
