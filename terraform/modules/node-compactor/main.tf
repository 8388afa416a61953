locals {
  # The cluster may live in another project than the function: its project is
  # where the functions' accounts are granted what they do to the cluster.
  cluster_project = coalesce(var.cluster.project, var.project_id)
  cluster_id      = "projects/${local.cluster_project}/locations/${var.cluster.location}/clusters/${var.cluster.name}"

  # The function rejects unknown keys and null values alike, so attributes a
  # tfvars file sets to null are dropped rather than rendered as null.
  config = merge(
    { for key, value in var.config : key => value if value != null && key != "nodePools" },
    {
      nodePools = {
        for pool, settings in var.config.nodePools : pool => {
          for key, value in settings : key => value if value != null
        }
      }
    },
    { placeholderNamespace = var.placeholder_namespace },
    { dryRun = var.dry_run },
  )
  config_json = jsonencode(local.config)

  # surgeSingleReplicas needs more of the cluster (SURGE_IAM_PERMISSIONS): granted when
  # surge_single_replicas says so, or, left null, when an enabled pool of the config opts in.
  surges = var.surge_single_replicas != null ? var.surge_single_replicas : anytrue([
    for settings in values(var.config.nodePools) : try(settings.enabled, false) == true && try(settings.surgeSingleReplicas, false) == true
  ])

  # Node replacement needs deploy/replacement.yaml in the cluster (PLACEHOLDER_RBAC_RULES, in either access
  # mode): printed when node_replacement says so, or, left null, when an enabled pool of the config enables it.
  replaces = var.node_replacement != null ? var.node_replacement : anytrue([
    for settings in values(var.config.nodePools) : try(settings.enabled, false) == true && try(settings.replacement.enabled, false) == true
  ])

  use_firestore         = var.config_source == "firestore"
  firestore_document    = coalesce(var.firestore_document, "node-compactor/${var.name}")
  firestore_collection  = split("/", local.firestore_document)[0]
  firestore_document_id = split("/", local.firestore_document)[1]

  config_source_environment = {
    env = {
      COMPACTOR_CONFIG = local.config_json
    }
    firestore = {
      COMPACTOR_FIRESTORE_DOCUMENT = local.firestore_document
      COMPACTOR_FIRESTORE_DATABASE = var.firestore_database
    }
  }

  # The names the Python code reads; see DESIGN.md "HTTP" and "Configuration".
  function_environment = merge(
    {
      COMPACTOR_CLUSTER            = local.cluster_id
      COMPACTOR_ENDPOINT_MODE      = var.endpoint_mode
      COMPACTOR_RUN_BUDGET_SECONDS = tostring(var.run_budget_seconds)
      COMPACTOR_LEASE_NAMESPACE    = var.lease_namespace
    },
    local.config_source_environment[var.config_source],
  )

  # The HPA floor job shares the cluster access and config sources; its own
  # settings carry estafette-k8s-hpa-scaler's variable names.
  hpa_floor_environment = merge(
    local.function_environment,
    {
      COMPACTOR_RUN_BUDGET_SECONDS = tostring(var.hpa_floor_run_budget_seconds)
      MINIMUM_REPLICAS_LOWER_BOUND = tostring(var.hpa_floor_minimum_replicas_lower_bound)
    },
    var.hpa_floor_prometheus_server_url == null ? {} : { PROMETHEUS_SERVER_URL = var.hpa_floor_prometheus_server_url },
    length(var.hpa_floor_prometheus_url_allowlist) == 0 ? {} : { PROMETHEUS_URL_ALLOWLIST = join(",", var.hpa_floor_prometheus_url_allowlist) },
  )

  # A run that overruns its budget still answers before the function times
  # out, and the function times out before the scheduler gives up on it, so a
  # failure is reported by the function rather than guessed by the scheduler.
  scheduler_attempt_deadline_seconds           = var.function_timeout_seconds + 30
  hpa_floor_scheduler_attempt_deadline_seconds = var.hpa_floor_timeout_seconds + 30

  function_url           = google_cloudfunctions2_function.compactor.service_config[0].uri
  hpa_floor_function_url = var.hpa_floor_enabled ? google_cloudfunctions2_function.hpa_floor[0].service_config[0].uri : null

  # The dashboard in the Cloud console: its ID is the last part of the
  # resource's id (projects/NUMBER/dashboards/ID), and the console opens it at
  # /monitoring/dashboards/custom/ID (the form GoogleCloudPlatform/
  # monitoring-dashboard-samples documents).
  dashboard_url = var.dashboard_enabled ? "https://console.cloud.google.com/monitoring/dashboards/custom/${regex("[^/]+$", google_monitoring_dashboard.cluster[0].id)}?project=${var.project_id}" : null

  # Manual calls take the query string as their only parameter.
  dry_run_command           = "curl -H \"Authorization: Bearer $(gcloud auth print-identity-token)\" \"${local.function_url}?dryRun=true\""
  hpa_floor_dry_run_command = var.hpa_floor_enabled ? "curl -H \"Authorization: Bearer $(gcloud auth print-identity-token)\" \"${local.hpa_floor_function_url}?dryRun=true\"" : null
}
