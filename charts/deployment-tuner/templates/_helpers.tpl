{{/* The release's full name: the release name when it already names the chart. */}}
{{- define "tuner.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "tuner.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tuner.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tuner.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tuner.labels" -}}
{{ include "tuner.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "tuner.serviceAccountName" -}}
{{- default (include "tuner.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The Secret holding the Neo4j password. */}}
{{- define "tuner.neo4jSecret" -}}
{{- default (printf "%s-neo4j" (include "tuner.fullname" .)) .Values.knowledge.neo4j.existingSecret -}}
{{- end -}}

{{/* settings.json: the user's settings with what the chart decides itself merged over them. */}}
{{- define "tuner.settings" -}}
{{- $settings := deepCopy (default dict .Values.settings) -}}
{{- $k := .Values.knowledge -}}
{{- $knowledge := dict "backend" $k.backend -}}
{{- if eq $k.backend "neo4j" -}}
{{- $_ := set $knowledge "uri" $k.neo4j.uri -}}
{{- $_ := set $knowledge "user" $k.neo4j.user -}}
{{- $_ := set $knowledge "database" $k.neo4j.database -}}
{{- $_ := set $knowledge "password_env" "TUNER_NEO4J_PASSWORD" -}}
{{- else if eq $k.backend "embedded" -}}
{{- $_ := set $knowledge "path" "/var/lib/tuner/knowledge.sqlite" -}}
{{- else -}}
{{- fail (printf "knowledge.backend: %q is neither neo4j nor embedded" $k.backend) -}}
{{- end -}}
{{- $_ := set $settings "knowledge" (merge $knowledge (default dict (get $settings "knowledge"))) -}}
{{- $p := .Values.pricing -}}
{{- $pricing := dict "currency" $p.currency "price_per_core" $p.pricePerCore "price_per_gb" $p.pricePerGb -}}
{{- if $p.nodeTypes -}}
{{- $_ := set $pricing "node_types" $p.nodeTypes -}}
{{- end -}}
{{- $_ := set $settings "pricing" (merge $pricing (default dict (get $settings "pricing"))) -}}
{{- $_ := set $settings "kubernetes" (dict "in_cluster" true) -}}
{{- $analyse := default dict (get $settings "analyse") -}}
{{- $excluded := default list (get $analyse "excluded_namespaces") -}}
{{- if not (has .Release.Namespace $excluded) -}}
{{- $excluded = append $excluded .Release.Namespace -}}
{{- end -}}
{{- $_ := set $analyse "excluded_namespaces" $excluded -}}
{{- $_ := set $settings "analyse" $analyse -}}
{{- $execute := default dict (get $settings "execute") -}}
{{- $_ := set $execute "journal_namespace" .Release.Namespace -}}
{{- $_ := set $execute "placeholder_priority_class" .Values.placeholderPriorityClass.name -}}
{{- $_ := set $settings "execute" $execute -}}
{{- $daemon := default dict (get $settings "daemon") -}}
{{- $_ := set $daemon "metrics_port" (int .Values.metrics.port) -}}
{{- $election := dict "enabled" (gt (int .Values.replicas) 1) "namespace" .Release.Namespace "name" (include "tuner.fullname" .) -}}
{{- $_ := set $daemon "leader_election" (merge $election (default dict (get $daemon "leader_election"))) -}}
{{- $_ := set $settings "daemon" $daemon -}}
{{- toPrettyJson $settings -}}
{{- end -}}
