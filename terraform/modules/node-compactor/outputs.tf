output "function_url" {
  description = "URL of the node-compactor function. Callers need an identity token and the invoker role."
  value       = local.function_url
}

output "function_name" {
  description = "Name of the function and of the Cloud Run service behind it: resource.labels.service_name in its logs, the `cluster` label of the log-based metrics."
  value       = google_cloudfunctions2_function.compactor.name
}

output "function_service_account_email" {
  description = "Identity the function runs as: the subject to bind in deploy/rbac.yaml when access_mode is \"rbac\"."
  value       = google_service_account.function.email
}

output "scheduler_service_account_email" {
  description = "Identity Cloud Scheduler calls the functions with."
  value       = google_service_account.scheduler.email
}

output "scheduler_job" {
  description = "Name of the compactor's Cloud Scheduler job; `gcloud scheduler jobs run` with it forces a run now."
  value       = google_cloud_scheduler_job.compactor.name
}

output "dry_run_command" {
  description = "Command that calls the function once in dry-run mode as yourself (you need the invoker role: see invoker_members)."
  value       = local.dry_run_command
}

output "config_json" {
  description = "The configuration the function reads, as JSON."
  value       = local.config_json
}

output "dashboard_id" {
  description = "The cluster's Cloud Monitoring dashboard, or null when dashboard_enabled is false."
  value       = one(google_monitoring_dashboard.cluster[*].id)
}

output "dashboard_url" {
  description = "Where to open the cluster's dashboard in the Cloud console, or null when dashboard_enabled is false."
  value       = local.dashboard_url
}

output "hpa_floor_function_url" {
  description = "URL of the HPA floor function, or null when hpa_floor_enabled is false."
  value       = local.hpa_floor_function_url
}

output "hpa_floor_service_account_email" {
  description = "Identity the HPA floor function runs as (the subject of deploy/rbac-hpa-floor.yaml in rbac mode), or null."
  value       = one(google_service_account.hpa_floor[*].email)
}

output "hpa_floor_dry_run_command" {
  description = "Command that calls the HPA floor function once in dry-run mode as yourself, or null."
  value       = local.hpa_floor_dry_run_command
}

output "surge_single_replicas" {
  description = "Whether the function may restart Deployments for pools with surgeSingleReplicas (the surge role in iam mode; deploy/rbac-surge.yaml to apply in rbac mode)."
  value       = local.surges
}

output "flow_control_enabled" {
  description = "Whether the root prints deploy/flowcontrol.yaml for this function's identity (flow_control_manifests)."
  value       = var.flow_control_enabled
}

output "lease_namespace" {
  description = "Namespace of the functions' Leases: where deploy/rbac.yaml's Lease Role must be in rbac mode."
  value       = var.lease_namespace
}

output "placeholder_namespace" {
  description = "Namespace of node replacement's placeholder pods (placeholderNamespace in the function's configuration): where deploy/replacement.yaml's namespace, Role and RoleBinding must be."
  value       = var.placeholder_namespace
}

output "node_replacement" {
  description = "Whether the cluster needs deploy/replacement.yaml (some enabled pool enables replacement, or node_replacement says so): the root prints it in replacement_manifests."
  value       = local.replaces
}
