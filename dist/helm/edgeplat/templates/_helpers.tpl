{{/* Chart name, truncated to the 63 characters Kubernetes names allow. */}}
{{- define "edgeplat.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified name; the release name alone when it holds the chart's. */}}
{{- define "edgeplat.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "edgeplat.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "edgeplat.labels" -}}
helm.sh/chart: {{ include "edgeplat.chart" . }}
app.kubernetes.io/name: {{ include "edgeplat.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "edgeplat.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: edgeplat
{{- end }}

{{/* Selector labels of one role; call with (dict "root" $ "component" "api"). */}}
{{- define "edgeplat.selectorLabels" -}}
app.kubernetes.io/name: {{ include "edgeplat.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "edgeplat.tag" -}}
{{- .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "edgeplat.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "edgeplat.tag" .) }}
{{- end }}

{{- define "edgeplat.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "edgeplat.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret the pods read: the chart's own, or existingSecret. */}}
{{- define "edgeplat.secretName" -}}
{{- .Values.secrets.existingSecret | default (include "edgeplat.fullname" .) }}
{{- end }}

{{/* An env entry read from the Secret; (dict "root" $ "env" "DB_PASSWORD" "key" "db-password" "optional" false). */}}
{{- define "edgeplat.secretEnv" -}}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ include "edgeplat.secretName" .root }}
      key: {{ .key }}
      {{- if .optional }}
      optional: true
      {{- end }}
{{- end }}

{{/* Settings both roles read: PostgreSQL, the stream store, the spool. */}}
{{- define "edgeplat.commonEnv" -}}
- name: DB_HOST
  value: {{ .Values.postgresql.host | quote }}
- name: DB_PORT
  value: {{ .Values.postgresql.port | quote }}
- name: DB_NAME
  value: {{ .Values.postgresql.database | quote }}
- name: DB_USER
  value: {{ .Values.postgresql.user | quote }}
- name: DB_SSL
  value: {{ .Values.postgresql.sslMode | quote }}
{{ include "edgeplat.secretEnv" (dict "root" . "env" "DB_PASSWORD" "key" "db-password") }}
- name: STREAMSTORE_HOST
  value: {{ .Values.redis.host | quote }}
- name: STREAMSTORE_PORT
  value: {{ .Values.redis.port | quote }}
- name: STREAMSTORE_DB
  value: {{ .Values.redis.db | quote }}
{{ include "edgeplat.secretEnv" (dict "root" . "env" "STREAMSTORE_PASSWORD" "key" "streamstore-password" "optional" true) }}
- name: DISK_SPOOL_PATH
  value: /var/lib/edgeplat/spool
{{- end }}

{{/* Volumes both roles mount: a writable /tmp and the spool, on a read-only root. */}}
{{- define "edgeplat.volumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
- name: spool
  emptyDir:
    sizeLimit: {{ .Values.spool.sizeLimit }}
{{- end }}

{{- define "edgeplat.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: spool
  mountPath: /var/lib/edgeplat/spool
{{- end }}

{{/* GET /health on the named port "http"; call with the probe's values. */}}
{{- define "edgeplat.probe" -}}
httpGet:
  path: /health
  port: http
{{ toYaml . }}
{{- end }}
