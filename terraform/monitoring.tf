locals {
  # Values of the `event` field the function writes in its JSON log lines.
  log_metrics = {
    "drains-started" = {
      event       = "drain-started"
      severity    = null
      description = "Nodes node-compactor cordoned and started to drain."
    }
    "drains-completed" = {
      event       = "drain-completed"
      severity    = null
      description = "Drains that moved every pod off their node, leaving it to the Cluster Autoscaler."
    }
    "rollbacks" = {
      event       = "rollback"
      severity    = null
      description = "Drains given up and undone: the node was uncordoned."
    }
    "failed-runs" = {
      event       = "run-failed"
      severity    = "ERROR"
      description = "Runs of node-compactor that failed."
    }
  }
}

resource "google_logging_metric" "events" {
  for_each = local.log_metrics

  project     = var.project_id
  name        = "${var.name}/${each.key}"
  description = each.value.description
  filter = join(" AND ", compact([
    "resource.type=\"cloud_run_revision\"",
    "resource.labels.service_name=\"${var.name}\"",
    "jsonPayload.event=\"${each.value.event}\"",
    each.value.severity == null ? "" : "severity>=${each.value.severity}",
  ]))

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "node-compactor ${each.key}"
  }

  depends_on = [google_project_service.apis]
}

resource "google_monitoring_alert_policy" "failed_runs" {
  count = var.alert_on_failed_runs ? 1 : 0

  project               = var.project_id
  display_name          = "${var.name}: failed runs"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "A node-compactor run failed"

    condition_threshold {
      filter          = "resource.type=\"cloud_run_revision\" AND metric.type=\"logging.googleapis.com/user/${google_logging_metric.events["failed-runs"].name}\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "A node-compactor run for `${local.cluster_id}` failed. Its log line (jsonPayload.event=\"run-failed\") names the error. A drain in progress is continued or rolled back by the next successful run; see docs/deploy.md, \"Troubleshooting\"."
  }
}
