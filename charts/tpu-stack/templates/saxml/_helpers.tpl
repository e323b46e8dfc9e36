{{/* tpu-stack.saxmlRoot: the gs:// root where the admin server keeps its state and servers find it. */}}
{{- define "tpu-stack.saxmlRoot" -}}
{{- printf "gs://%s/%s" (default .Values.global.gcsfuse.bucketName .Values.saxml.stateBucket) (trimPrefix "/" .Values.saxml.rootPrefix) -}}
{{- end -}}

{{/* tpu-stack.saxmlComponentName: <saxml name>-<component>. */}}
{{- define "tpu-stack.saxmlComponentName" -}}
{{- printf "%s-%s" (include "tpu-stack.saxmlName" .ctx) .component -}}
{{- end -}}

{{/* tpu-stack.saxmlPodSecurity: Saxml's images are Google's and run as they were built (their
user is not ours to choose), so Saxml meets Pod Security's `baseline`, not `restricted`; and
`baseline` only with modelServer.hostNetwork off. */}}
{{- define "tpu-stack.saxmlPodSecurity" -}}
automountServiceAccountToken: false
securityContext:
  seccompProfile:
    type: RuntimeDefault
{{- end -}}
