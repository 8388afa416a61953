resource "google_cloud_scheduler_job" "compactor" {
  project     = var.project_id
  region      = var.region
  name        = var.name
  description = "Runs node-compactor on ${local.cluster_id}: each call continues or starts at most one drain."
  schedule    = var.schedule
  time_zone   = var.time_zone
  paused      = var.scheduler_paused

  attempt_deadline = "${local.scheduler_attempt_deadline_seconds}s"

  # The next scheduled call is the retry: it picks up where a failed run
  # stopped, from the state kept on the nodes.
  retry_config {
    retry_count = 0
  }

  http_target {
    http_method = "POST"
    uri         = local.function_url

    oidc_token {
      service_account_email = google_service_account.scheduler.email
      audience              = local.function_url
    }
  }

  # Calls made before the invoker grant exists would fail with 403.
  depends_on = [google_cloud_run_service_iam_member.invoker]
}
