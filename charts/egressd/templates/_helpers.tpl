{{/*
egressd.fullname names the Service and the other objects of the release:
"egressd" when the release name contains it, else "<release>-egressd".
*/}}
{{- define "egressd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains "egressd" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-egressd" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
egressd.selectorLabels: app.kubernetes.io/name is always "egressd", the label
`egressd netpol` and the NetworkPolicies select on (docs/design.md, "NetworkPolicy").
*/}}
{{- define "egressd.selectorLabels" -}}
app.kubernetes.io/name: egressd
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "egressd.labels" -}}
{{ include "egressd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "egressd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "egressd.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "egressd.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* egressd.advertiseIP: the address transparent DNS answers point at. */}}
{{- define "egressd.advertiseIP" -}}
{{- default .Values.service.clusterIP .Values.transparent.advertiseIP -}}
{{- end -}}

{{- define "egressd.transparent" -}}
{{- if or .Values.transparent.sni.enabled .Values.transparent.http.enabled -}}true{{- end -}}
{{- end -}}

{{/*
egressd.servingPorts: egressd's container ports that workloads reach, in the
order of netpol.NetworkPolicies: proxy 3128, SNI 8443, HTTP 8080 (TCP; open
even while the transparent listeners are off, as `egressd netpol` does), DNS
5353 over UDP and TCP.
*/}}
{{- define "egressd.servingPorts" -}}
- protocol: TCP
  port: 3128
- protocol: TCP
  port: 8443
- protocol: TCP
  port: 8080
- protocol: UDP
  port: 5353
- protocol: TCP
  port: 5353
{{- end -}}

{{/*
egressd.checkNetpol refuses what netpol.Options.Validate refuses: an
ipBlock must never include link-local or a metadata address.
*/}}
{{- define "egressd.checkNetpol" -}}
{{- $np := .Values.networkPolicy -}}
{{- $never := list "169.254." "168.63.129.16" "100.100.100.200" "fe80:" "fd00:ec2:" "fd20:ce:" "0.0.0.0" "::/" "64:ff9b:" "2002:" -}}
{{- $addrs := $np.apiServer.cidrs -}}
{{- if $np.nodeLocalDNS }}{{ $addrs = append $addrs $np.nodeLocalDNS }}{{ end -}}
{{- range $addrs -}}
{{- $a := lower . -}}
{{- range $never -}}
{{- if hasPrefix . $a -}}
{{- fail (printf "networkPolicy: %s is, or may overlap, a link-local, metadata or default range; no ipBlock may include one (for NodeLocal DNSCache use the kube-dns service address it also binds)" $a) -}}
{{- end -}}
{{- end -}}
{{- if hasSuffix "/0" $a -}}
{{- fail (printf "networkPolicy: apiServer cidr %s is a default route" $a) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
egressd.serviceHost: the egressd Service address as the probe Pod sees it:
service.clusterIP when fixed, else the Service's link variable
(FULLNAME_SERVICE_HOST, expanded by the kubelet in args), so that the probe
needs no name resolution: a workload's NetworkPolicy lets it reach egressd
only, not the cluster DNS.
*/}}
{{- define "egressd.serviceHost" -}}
{{- if .Values.service.clusterIP -}}
{{- .Values.service.clusterIP -}}
{{- else -}}
{{- printf "$(%s_SERVICE_HOST)" (include "egressd.fullname" . | upper | replace "-" "_") -}}
{{- end -}}
{{- end -}}

{{/* egressd.hostPort joins a host (an IPv6 address bracketed) and a port. */}}
{{- define "egressd.hostPort" -}}
{{- $h := index . 0 -}}
{{- if contains ":" $h }}{{ printf "[%s]:%v" $h (index . 1) }}{{ else }}{{ printf "%s:%v" $h (index . 1) }}{{ end -}}
{{- end -}}

{{/*
egressd.webhookConfigName: the MutatingWebhookConfiguration is cluster-scoped,
so its name carries the namespace (one release per namespace).
*/}}
{{- define "egressd.webhookConfigName" -}}
{{- printf "%s-%s" (include "egressd.fullname" .) .Release.Namespace | trunc 253 -}}
{{- end -}}

{{/* egressd.webhookSecret: the serving certificate's Secret, in both modes. */}}
{{- define "egressd.webhookSecret" -}}
{{- printf "%s-webhook-tls" (include "egressd.fullname" .) -}}
{{- end -}}

{{/* egressd.selfManagedCert: injection with egressd's own certificate. */}}
{{- define "egressd.selfManagedCert" -}}
{{- if and .Values.inject.enabled (not .Values.inject.certManager.enabled) -}}true{{- end -}}
{{- end -}}

{{/* egressd.inspectCASecret: the Secret with the inspection CA's tls.crt and
tls.key (inspection.caSecret, or the one cert-manager writes); empty when
inspection is off. */}}
{{- define "egressd.inspectCASecret" -}}
{{- if .Values.inspection.certManager.enabled -}}
{{- printf "%s-inspection-ca-tls" (include "egressd.fullname" .) -}}
{{- else -}}
{{- .Values.inspection.caSecret -}}
{{- end -}}
{{- end -}}
