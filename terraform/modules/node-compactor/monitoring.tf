locals {
  # Each log-based metric is shared by every cluster; the `cluster` label
  # (the function's name, i.e. the Cloud Run service that logged the line)
  # picks this cluster's series.
  cluster_series = "metric.label.cluster=\"${var.name}\""

  # Dashboard tiles, in reading order: what a run did, then what needs a look.
  dashboard_tiles = [
    { title = "Runs", metric = "runs", aligner = "ALIGN_SUM", reducer = "REDUCE_SUM", plot = "STACKED_BAR" },
    { title = "Drains started", metric = "drains-started", aligner = "ALIGN_SUM", reducer = "REDUCE_SUM", plot = "STACKED_BAR" },
    { title = "Drains completed", metric = "drains-completed", aligner = "ALIGN_SUM", reducer = "REDUCE_SUM", plot = "STACKED_BAR" },
    { title = "Rollbacks", metric = "rollbacks", aligner = "ALIGN_SUM", reducer = "REDUCE_SUM", plot = "STACKED_BAR" },
    { title = "Failed runs", metric = "failed-runs", aligner = "ALIGN_SUM", reducer = "REDUCE_SUM", plot = "STACKED_BAR" },
    # A distribution of the count each run reports: its largest value per
    # period is how many emptied nodes were waiting for the Cluster Autoscaler.
    { title = "Nodes awaiting removal", metric = "nodes-awaiting-removal", aligner = "ALIGN_PERCENTILE_99", reducer = "REDUCE_MAX", plot = "LINE" },
    # Money: what the priced nodes cost per hour as runs read them (the median
    # of the period's runs), and what each action started saves per hour.
    { title = "Cluster price per hour (priced nodes, list prices)", metric = "cluster-price-per-hour", aligner = "ALIGN_PERCENTILE_50", reducer = "REDUCE_MAX", plot = "LINE" },
    { title = "Savings per hour of each drain or replacement started", metric = "savings-per-hour", aligner = "ALIGN_PERCENTILE_99", reducer = "REDUCE_MAX", plot = "STACKED_BAR" },
  ]
}

resource "google_monitoring_dashboard" "cluster" {
  count = var.dashboard_enabled ? 1 : 0

  project = var.project_id
  dashboard_json = jsonencode({
    displayName = "node-compactor: ${var.cluster.name} (${var.name})"
    mosaicLayout = {
      columns = 12
      tiles = [
        for index, tile in local.dashboard_tiles : {
          xPos   = (index % 2) * 6
          yPos   = floor(index / 2) * 4
          width  = 6
          height = 4
          widget = {
            title = tile.title
            xyChart = {
              dataSets = [{
                plotType = tile.plot
                timeSeriesQuery = {
                  timeSeriesFilter = {
                    filter = "metric.type=\"${var.log_metric_types[tile.metric]}\" AND resource.type=\"cloud_run_revision\" AND ${local.cluster_series}"
                    aggregation = {
                      alignmentPeriod    = "300s"
                      perSeriesAligner   = tile.aligner
                      crossSeriesReducer = tile.reducer
                    }
                  }
                }
              }]
            }
          }
        }
      ]
    }
  })
}

resource "google_monitoring_alert_policy" "failed_runs" {
  count = var.alert_on_failed_runs ? 1 : 0

  project               = var.project_id
  display_name          = "${var.name}: failed runs"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "A node-compactor run on ${var.cluster.name} failed"

    condition_threshold {
      # log_metric_types comes through the root module's time_sleep: the
      # alert is created only once Cloud Monitoring knows the metric
      # (hashicorp/terraform-provider-google#11102).
      filter          = "resource.type=\"cloud_run_revision\" AND metric.type=\"${var.log_metric_types["failed-runs"]}\" AND ${local.cluster_series}"
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
    content   = "A node-compactor run for `${local.cluster_id}` failed. Its log line (jsonPayload.event=\"run-failed\", resource.labels.service_name=\"${var.name}\") names the error. A drain in progress is continued or rolled back by the next successful run; see docs/deploy.md, \"Troubleshooting\"."
  }
}
