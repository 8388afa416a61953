locals {
  # Values of the `event` field the function writes in its JSON log lines.
  # nodes-awaiting-removal reads a number from the run-summary line instead
  # of counting lines.
  log_metrics = {
    "runs" = {
      event       = "run-summary"
      severity    = null
      value_field = null
      description = "Runs of node-compactor that completed (whether or not they acted)."
    }
    "drains-started" = {
      event       = "drain-started"
      severity    = null
      value_field = null
      description = "Nodes node-compactor cordoned and started to drain."
    }
    "drains-completed" = {
      event       = "drain-completed"
      severity    = null
      value_field = null
      description = "Drains that moved every pod off their node, leaving it to the Cluster Autoscaler."
    }
    "rollbacks" = {
      event       = "rollback"
      severity    = null
      value_field = null
      description = "Drains given up and undone: the node was uncordoned."
    }
    "failed-runs" = {
      event       = "run-failed"
      severity    = "ERROR"
      value_field = null
      description = "Runs of node-compactor that failed."
    }
    "nodes-awaiting-removal" = {
      event       = "run-summary"
      severity    = null
      value_field = "jsonPayload.nodesAwaitingRemoval"
      description = "Emptied, cordoned nodes waiting for the Cluster Autoscaler, as each run counts them."
    }
    "cluster-price-per-hour" = {
      event       = "run-summary"
      severity    = null
      value_field = "jsonPayload.clusterPricePerHour"
      description = "What the cluster's priced nodes cost per hour at list prices, as each run reads them (the run-summary line's currency; unpriced nodes left out and counted in unpricedNodes)."
    }
    "savings-per-hour" = {
      event       = "run-summary"
      severity    = null
      value_field = "jsonPayload.savingsPerHour"
      description = "What each drain or replacement a run starts saves per hour once its nodes are gone."
    }
  }
  # Money is spread over orders of magnitude: exponential buckets from 0.01
  # an hour (x1.5 each, to about 1,900 an hour); counts get one bucket a node.
  money_metrics = toset(["cluster-price-per-hour", "savings-per-hour"])

  # Every cluster's compactor function: one set of metrics serves them all,
  # and the `cluster` label tells their series apart.
  compactor_services = sort([for settings in values(local.clusters) : settings.name])
  services_filter    = "(${join(" OR ", [for service in local.compactor_services : "resource.labels.service_name=\"${service}\""])})"

  log_metric_types = {
    for key, metric in google_logging_metric.events : key => "logging.googleapis.com/user/${metric.name}"
  }
  # An alert policy on a metric Cloud Monitoring does not know yet fails with
  # 404 "Cannot find metric(s) ... could take up to 10 minutes to become
  # available" (hashicorp/terraform-provider-google#11102; the provider does
  # not retry). When some cluster has an alert, the modules read the metric
  # types from the time_sleep below, so alerts and dashboards wait for it.
  log_metric_types_for_clusters = local.any_alert ? time_sleep.log_metrics[0].triggers : local.log_metric_types
}

resource "google_logging_metric" "events" {
  for_each = local.log_metrics

  project     = var.project_id
  name        = "${var.name}/${each.key}"
  description = each.value.description
  filter = join(" AND ", compact([
    "resource.type=\"cloud_run_revision\"",
    local.services_filter,
    "jsonPayload.event=\"${each.value.event}\"",
    each.value.severity == null ? "" : "severity>=${each.value.severity}",
    each.value.value_field == null ? "" : "${each.value.value_field}:*",
  ]))

  label_extractors = {
    cluster = "EXTRACT(resource.labels.service_name)"
  }
  value_extractor = each.value.value_field == null ? null : "EXTRACT(${each.value.value_field})"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = each.value.value_field == null ? "INT64" : "DISTRIBUTION"
    unit         = contains(local.money_metrics, each.key) ? "{currency}/h" : "1"
    display_name = "node-compactor ${each.key}"

    labels {
      key         = "cluster"
      value_type  = "STRING"
      description = "The node-compactor function that logged the line: one per GKE cluster."
    }
  }

  # A distribution needs buckets: one per node count from 0 to 20, or
  # exponential ones for money.
  dynamic "bucket_options" {
    for_each = each.value.value_field == null || contains(local.money_metrics, each.key) ? [] : [each.value.value_field]
    content {
      linear_buckets {
        num_finite_buckets = 20
        width              = 1
        offset             = 0
      }
    }
  }
  dynamic "bucket_options" {
    for_each = contains(local.money_metrics, each.key) ? [each.value.value_field] : []
    content {
      exponential_buckets {
        num_finite_buckets = 30
        growth_factor      = 1.5
        scale              = 0.01
      }
    }
  }

  depends_on = [google_project_service.apis]
}

resource "time_sleep" "log_metrics" {
  count = local.any_alert ? 1 : 0

  # The new metrics wait while the functions build (several minutes), so the
  # wait costs little of the first apply.
  create_duration = var.log_metric_propagation_wait
  triggers        = local.log_metric_types
}
