provider "google" {
  project        = var.project_id
  region         = var.region
  default_labels = var.labels
}

locals {
  # Each cluster's deployment name: the function, its scheduler job, the
  # prefix of its service accounts and the `cluster` label of the metrics.
  clusters = {
    for key, settings in var.clusters : key => merge(settings, {
      name = try(settings.name, null) != null ? settings.name : "nc-${key}"
    })
  }

  # What the shared resources must provide, from every cluster's choices
  # (the module's defaults: access_mode "iam", config_source "env").
  any_iam_access = anytrue([for settings in values(local.clusters) : try(settings.access_mode, null) != "rbac"])
  any_firestore  = anytrue([for settings in values(local.clusters) : try(settings.config_source, null) == "firestore"])
  any_hpa_floor  = anytrue([for settings in values(local.clusters) : try(settings.hpa_floor_enabled, null) == true])
  any_hpa_floor_on_iam = anytrue([
    for settings in values(local.clusters) : try(settings.hpa_floor_enabled, null) == true && try(settings.access_mode, null) != "rbac"
  ])
  any_managed_prometheus = anytrue([
    for settings in values(local.clusters) : try(settings.hpa_floor_enabled, null) == true && try(settings.hpa_floor_prometheus_server_url, null) == null
  ])
  # A cluster grants surgeSingleReplicas' permissions when it says so, or, unset, when an enabled
  # pool of its config opts in (as modules/node-compactor decides).
  any_surge_on_iam = anytrue([
    for settings in values(local.clusters) : try(settings.access_mode, null) != "rbac" && (
      try(settings.surge_single_replicas, null) != null ? try(settings.surge_single_replicas, false) == true : anytrue([
        for pool in values(settings.config.nodePools) : try(pool.enabled, false) == true && try(pool.surgeSingleReplicas, false) == true
      ])
    )
  ])
  any_alert = anytrue([for settings in values(local.clusters) : try(settings.alert_on_failed_runs, null) == true])

  source_archive = {
    bucket = google_storage_bucket.source.name
    object = google_storage_bucket_object.source.name
  }
}

module "cluster" {
  source   = "./modules/node-compactor"
  for_each = local.clusters

  # Shared by every cluster, created once in this root module.
  project_id        = var.project_id
  region            = var.region
  runtime           = var.runtime
  source_archive    = local.source_archive
  docker_repository = google_artifact_registry_repository.images.id
  # Through the time_sleep: no build starts before its roles propagated.
  build_service_account = time_sleep.build_iam.triggers["service_account"]
  custom_roles          = local.custom_roles
  # Through the time_sleep when an alert needs them (see monitoring.tf).
  log_metric_types   = local.log_metric_types_for_clusters
  firestore_database = local.firestore_database

  # This cluster's own settings; absent or null means the module's default.
  name                                   = each.value.name
  cluster                                = each.value.cluster
  config                                 = each.value.config
  dry_run                                = try(each.value.dry_run, null)
  config_source                          = try(each.value.config_source, null)
  firestore_document                     = try(each.value.firestore_document, null)
  schedule                               = try(each.value.schedule, null)
  time_zone                              = try(each.value.time_zone, null)
  scheduler_paused                       = try(each.value.scheduler_paused, null)
  run_budget_seconds                     = try(each.value.run_budget_seconds, null)
  function_timeout_seconds               = try(each.value.function_timeout_seconds, null)
  function_memory                        = try(each.value.function_memory, null)
  function_cpu                           = try(each.value.function_cpu, null)
  lease_namespace                        = try(each.value.lease_namespace, null)
  placeholder_namespace                  = try(each.value.placeholder_namespace, null)
  node_replacement                       = try(each.value.node_replacement, null)
  endpoint_mode                          = try(each.value.endpoint_mode, null)
  vpc_connector                          = try(each.value.vpc_connector, null)
  vpc_connector_egress_settings          = try(each.value.vpc_connector_egress_settings, null)
  direct_vpc_egress                      = try(each.value.direct_vpc_egress, null)
  access_mode                            = try(each.value.access_mode, null)
  invoker_members                        = try(each.value.invoker_members, null)
  ingress_settings                       = try(each.value.ingress_settings, null)
  dashboard_enabled                      = try(each.value.dashboard_enabled, null)
  alert_on_failed_runs                   = try(each.value.alert_on_failed_runs, null)
  notification_channels                  = try(each.value.notification_channels, null)
  surge_single_replicas                  = try(each.value.surge_single_replicas, null)
  flow_control_enabled                   = try(each.value.flow_control_enabled, null)
  hpa_floor_enabled                      = try(each.value.hpa_floor_enabled, null)
  hpa_floor_schedule                     = try(each.value.hpa_floor_schedule, null)
  hpa_floor_dry_run                      = try(each.value.hpa_floor_dry_run, null)
  hpa_floor_run_budget_seconds           = try(each.value.hpa_floor_run_budget_seconds, null)
  hpa_floor_timeout_seconds              = try(each.value.hpa_floor_timeout_seconds, null)
  hpa_floor_minimum_replicas_lower_bound = try(each.value.hpa_floor_minimum_replicas_lower_bound, null)
  hpa_floor_prometheus_server_url        = try(each.value.hpa_floor_prometheus_server_url, null)
  hpa_floor_prometheus_url_allowlist     = try(each.value.hpa_floor_prometheus_url_allowlist, null)

  depends_on = [google_project_service.apis]
}
