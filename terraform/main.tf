provider "google" {
  project        = var.project_id
  region         = var.region
  default_labels = var.labels
}

locals {
  # variables.tf checks a cluster's path against the same pattern.
  cluster_path_pattern = "^projects/(?P<project>[a-z][a-z0-9-]{4,28}[a-z0-9])/locations/(?P<location>[a-z]+-[a-z]+[0-9]+(?:-[a-z])?)/clusters/(?P<name>[a-z](?:[a-z0-9-]*[a-z0-9])?)$"

  # Each cluster's deployment name: the function, its scheduler job, the
  # prefix of its service accounts and the `cluster` label of the metrics.
  # Each cluster as { name, location, project }, whichever way it was given.
  clusters = {
    for key, settings in var.clusters : key => merge(settings, {
      name = try(settings.name, null) != null ? settings.name : "nc-${key}"
      cluster = can(tostring(settings.cluster)) ? regex(local.cluster_path_pattern, settings.cluster) : {
        name     = settings.cluster.name
        location = settings.cluster.location
        project  = try(settings.cluster.project, null) != null ? settings.cluster.project : var.project_id
      }
    })
  }

  # The projects that hold a cluster; the custom roles the clusters of each
  # need are created there (iam.tf).
  cluster_projects = toset([for settings in values(local.clusters) : settings.cluster.project])

  # Which shared custom role each cluster's accounts are granted, from its
  # choices as modules/node-compactor decides (its defaults: access_mode
  # "iam", config_source "env").
  roles_needed = {
    for key, settings in local.clusters : key => {
      cluster   = try(settings.access_mode, null) != "rbac"
      firestore = try(settings.config_source, null) == "firestore"
      hpa_floor = try(settings.hpa_floor_enabled, null) == true && try(settings.access_mode, null) != "rbac"
      prometheus = (
        try(settings.hpa_floor_enabled, null) == true && try(settings.hpa_floor_prometheus_server_url, null) == null
      )
      # surgeSingleReplicas' permissions when the cluster says so, or, unset,
      # when an enabled pool of its config opts in.
      surge = try(settings.access_mode, null) != "rbac" && (
        try(settings.surge_single_replicas, null) != null ? try(settings.surge_single_replicas, false) == true : anytrue([
          for pool in values(settings.config.nodePools) : try(pool.enabled, false) == true && try(pool.surgeSingleReplicas, false) == true
        ])
      )
    }
  }

  # What the shared resources must provide, from every cluster's choices.
  any_firestore = anytrue([for needed in values(local.roles_needed) : needed.firestore])
  any_alert     = anytrue([for settings in values(local.clusters) : try(settings.alert_on_failed_runs, null) == true])

  # The shared custom roles to create, by "PROJECT/ROLE": a project's custom
  # role can be granted only in that project, so each project that holds a
  # cluster gets the roles its clusters need and no other; the Firestore role
  # is granted in project_id, where the configuration documents are.
  custom_roles_needed = {
    for pair in setproduct(["cluster", "surge", "firestore", "hpa_floor", "prometheus"], setunion(local.cluster_projects, [var.project_id])) :
    "${pair[1]}/${pair[0]}" => { role = pair[0], project = pair[1] }
    if anytrue([
      for key, needed in local.roles_needed : needed[pair[0]] && (pair[0] == "firestore" ? pair[1] == var.project_id : local.clusters[key].cluster.project == pair[1])
    ])
  }

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
  # The roles of the cluster's project (iam.tf).
  custom_roles = local.custom_roles_by_project[each.value.cluster.project]
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
