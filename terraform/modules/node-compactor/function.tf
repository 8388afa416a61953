resource "google_cloudfunctions2_function" "compactor" {
  #checkov:skip=CKV_GCP_124:Every caller needs an identity token with run.invoker, held only by the scheduler's account and the listed invoker_members; ALLOW_ALL is the default so that people can make the documented manual dry-run call, and ingress_settings = "ALLOW_INTERNAL_ONLY" closes it.
  project     = var.project_id
  location    = var.region
  name        = var.name
  description = "node-compactor for ${local.cluster_id}: drains one underutilized node at a time so the Cluster Autoscaler removes it."

  build_config {
    runtime     = var.runtime
    entry_point = "compact"
    # Passed through the root module's time_sleep: the build starts only once
    # the build account's roles have had time to propagate.
    service_account   = var.build_service_account
    docker_repository = var.docker_repository

    source {
      storage_source {
        bucket = var.source_archive.bucket
        object = var.source_archive.object
      }
    }
  }

  service_config {
    service_account_email = google_service_account.function.email

    # One run at a time: runs coordinate through a Lease as well, but a
    # single instance serving a single request keeps them from even trying.
    min_instance_count               = 0
    max_instance_count               = 1
    max_instance_request_concurrency = 1

    available_memory               = var.function_memory
    available_cpu                  = var.function_cpu
    timeout_seconds                = var.function_timeout_seconds
    ingress_settings               = var.ingress_settings
    all_traffic_on_latest_revision = true

    environment_variables = local.function_environment

    vpc_connector                 = var.vpc_connector
    vpc_connector_egress_settings = var.vpc_connector == null ? null : var.vpc_connector_egress_settings

    direct_vpc_egress = var.direct_vpc_egress == null ? null : var.direct_vpc_egress.egress
    dynamic "direct_vpc_network_interface" {
      for_each = var.direct_vpc_egress == null ? [] : [var.direct_vpc_egress]
      content {
        network    = direct_vpc_network_interface.value.network
        subnetwork = direct_vpc_network_interface.value.subnetwork
        tags       = direct_vpc_network_interface.value.tags
      }
    }
  }
}

# The HPA floor job: the same archive, built again with the other entry point
# (a function has exactly one), its own account, the same network path.
resource "google_cloudfunctions2_function" "hpa_floor" {
  #checkov:skip=CKV_GCP_124:Every caller needs an identity token with run.invoker, held only by the scheduler's account and the listed invoker_members; ingress_settings = "ALLOW_INTERNAL_ONLY" closes it to outside networks as for the compactor.
  count = var.hpa_floor_enabled ? 1 : 0

  project     = var.project_id
  location    = var.region
  name        = "${var.name}-hpa"
  description = "node-compactor HPA floor for ${local.cluster_id}: raises minReplicas of annotated HPAs so that a failing or dipping workload is not scaled away."

  build_config {
    runtime           = var.runtime
    entry_point       = "hpa_floor"
    service_account   = var.build_service_account
    docker_repository = var.docker_repository

    source {
      storage_source {
        bucket = var.source_archive.bucket
        object = var.source_archive.object
      }
    }
  }

  service_config {
    service_account_email = google_service_account.hpa_floor[0].email

    min_instance_count               = 0
    max_instance_count               = 1
    max_instance_request_concurrency = 1

    # HPAs and a few instant queries: far less than a cluster snapshot.
    available_memory               = "256Mi"
    available_cpu                  = "0.5"
    timeout_seconds                = var.hpa_floor_timeout_seconds
    ingress_settings               = var.ingress_settings
    all_traffic_on_latest_revision = true

    environment_variables = local.hpa_floor_environment

    vpc_connector                 = var.vpc_connector
    vpc_connector_egress_settings = var.vpc_connector == null ? null : var.vpc_connector_egress_settings

    direct_vpc_egress = var.direct_vpc_egress == null ? null : var.direct_vpc_egress.egress
    dynamic "direct_vpc_network_interface" {
      for_each = var.direct_vpc_egress == null ? [] : [var.direct_vpc_egress]
      content {
        network    = direct_vpc_network_interface.value.network
        subnetwork = direct_vpc_network_interface.value.subnetwork
        tags       = direct_vpc_network_interface.value.tags
      }
    }
  }
}
