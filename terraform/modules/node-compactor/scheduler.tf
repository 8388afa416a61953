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

resource "google_cloud_scheduler_job" "hpa_floor" {
  count = var.hpa_floor_enabled ? 1 : 0

  project     = var.project_id
  region      = var.region
  name        = "${var.name}-hpa"
  description = "Runs the node-compactor HPA floor job on ${local.cluster_id}."
  schedule    = var.hpa_floor_schedule
  time_zone   = var.time_zone
  paused      = var.scheduler_paused

  attempt_deadline = "${local.hpa_floor_scheduler_attempt_deadline_seconds}s"

  # The next call comes a minute later and starts from the HPAs as they are.
  retry_config {
    retry_count = 0
  }

  http_target {
    http_method = "POST"
    # The dry-run switch travels as the one parameter the function takes.
    uri = var.hpa_floor_dry_run ? "${local.hpa_floor_function_url}?dryRun=true" : local.hpa_floor_function_url

    oidc_token {
      service_account_email = google_service_account.scheduler.email
      # The audience is the service URL, without the query string.
      audience = local.hpa_floor_function_url
    }
  }

  depends_on = [google_cloud_run_service_iam_member.hpa_floor_invoker]
}
