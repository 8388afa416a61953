output "function_url" {
  description = "URL of the node-compactor function. Callers need an identity token and the invoker role."
  value       = local.function_url
}

output "function_name" {
  description = "Name of the function and of the Cloud Run service behind it (resource.labels.service_name in its logs)."
  value       = google_cloudfunctions2_function.compactor.name
}

output "function_service_account_email" {
  description = "Identity the function runs as: the subject to bind in deploy/rbac.yaml when access_mode is \"rbac\"."
  value       = google_service_account.function.email
}

output "scheduler_service_account_email" {
  description = "Identity Cloud Scheduler calls the function with."
  value       = google_service_account.scheduler.email
}

output "build_service_account_email" {
  description = "Identity Cloud Build uses to build the function."
  value       = google_service_account.build.email
}

output "scheduler_job" {
  description = "Name of the Cloud Scheduler job; `gcloud scheduler jobs run` with it forces a run now."
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

output "custom_role_id" {
  description = "The custom IAM role granted to the function's service account, or null when none is needed."
  value       = one(google_project_iam_custom_role.function[*].name)
}

output "rbac_manifest" {
  description = "deploy/rbac.yaml with the function's service account filled in, when access_mode is \"rbac\": apply it with kubectl to the cluster."
  value       = var.access_mode == "rbac" ? replace(file("${path.module}/../deploy/rbac.yaml"), "FUNCTION_SERVICE_ACCOUNT_EMAIL", google_service_account.function.email) : null
}

output "source_object" {
  description = "The source archive the function was built from (its name carries the archive's MD5)."
  value       = "gs://${google_storage_bucket.source.name}/${google_storage_bucket_object.source.name}"
}
