resource "google_service_account" "function" {
  project      = var.project_id
  account_id   = var.name
  display_name = "node-compactor function (${var.cluster.name})"
  description  = "Identity of the node-compactor function for ${local.cluster_id}: reads the cluster, cordons and drains one node at a time."
}

resource "google_service_account" "scheduler" {
  project      = var.project_id
  account_id   = "${var.name}-scheduler"
  display_name = "node-compactor scheduler (${var.cluster.name})"
  description  = "Identity Cloud Scheduler uses to call the node-compactor functions of ${local.cluster_id}; may only invoke them."
}

# The HPA floor job gets an account of its own: the compactor never needs to
# patch HPAs and the HPA job never needs to evict pods, so neither holds the
# other's permissions.
resource "google_service_account" "hpa_floor" {
  count = var.hpa_floor_enabled ? 1 : 0

  project      = var.project_id
  account_id   = "${var.name}-hpa"
  display_name = "node-compactor HPA floor (${var.cluster.name})"
  description  = "Identity of the node-compactor HPA floor function for ${local.cluster_id}: reads and patches HorizontalPodAutoscalers, queries Prometheus."
}

locals {
  # Which shared custom role each account holds; keys are fixed strings so
  # that for_each is known before the roles exist. In rbac mode Kubernetes
  # RBAC grants the cluster access, so IAM only adds what RBAC cannot.
  function_roles = merge(
    var.access_mode == "iam" ? { cluster = var.custom_roles.cluster } : {},
    var.access_mode == "iam" && local.surges ? { surge = var.custom_roles.surge } : {},
    local.use_firestore ? { firestore = var.custom_roles.firestore } : {},
  )
  hpa_floor_roles = var.hpa_floor_enabled ? merge(
    var.access_mode == "iam" ? { hpa_floor = var.custom_roles.hpa_floor } : {},
    local.use_firestore ? { firestore = var.custom_roles.firestore } : {},
    # A Prometheus of your own needs no Google permission.
    var.hpa_floor_prometheus_server_url == null ? { prometheus = var.custom_roles.prometheus } : {},
  ) : {}

  # Where each role is granted: what the functions do to the cluster, and the
  # Managed Prometheus they query (the cluster's project's), in the cluster's
  # project; the Firestore document in project_id, where its database is. A
  # project custom role can only be granted in the project that defines it.
  role_projects = {
    cluster    = local.cluster_project
    surge      = local.cluster_project
    hpa_floor  = local.cluster_project
    prometheus = local.cluster_project
    firestore  = var.project_id
  }
}

resource "google_project_iam_member" "function" {
  for_each = local.function_roles

  project = local.role_projects[each.key]
  role    = each.value
  member  = google_service_account.function.member

  lifecycle {
    precondition {
      condition     = each.value != null
      error_message = "custom_roles.${each.key} is null, but this cluster needs that role (access_mode ${var.access_mode}, config_source ${var.config_source})."
    }
    precondition {
      condition     = each.value == null || startswith(coalesce(each.value, "-"), "projects/${local.role_projects[each.key]}/roles/")
      error_message = "custom_roles.${each.key} must be a custom role of project ${local.role_projects[each.key]}, where it is granted (a project's custom role cannot be granted in another project)."
    }
  }
}

resource "google_project_iam_member" "hpa_floor" {
  for_each = local.hpa_floor_roles

  project = local.role_projects[each.key]
  role    = each.value
  member  = google_service_account.hpa_floor[0].member

  lifecycle {
    precondition {
      condition     = each.value != null
      error_message = "custom_roles.${each.key} is null, but this cluster's HPA floor job needs that role."
    }
    precondition {
      condition     = each.value == null || startswith(coalesce(each.value, "-"), "projects/${local.role_projects[each.key]}/roles/")
      error_message = "custom_roles.${each.key} must be a custom role of project ${local.role_projects[each.key]}, where it is granted (a project's custom role cannot be granted in another project)."
    }
  }
}

# Enough to fetch the cluster's endpoint and connect, in the cluster's
# project; what the functions may do inside the cluster comes from
# deploy/rbac.yaml (and deploy/rbac-hpa-floor.yaml).
resource "google_project_iam_member" "function_cluster_viewer" {
  count = var.access_mode == "rbac" ? 1 : 0

  project = local.cluster_project
  role    = "roles/container.clusterViewer"
  member  = google_service_account.function.member
}

resource "google_project_iam_member" "hpa_floor_cluster_viewer" {
  count = var.access_mode == "rbac" && var.hpa_floor_enabled ? 1 : 0

  project = local.cluster_project
  role    = "roles/container.clusterViewer"
  member  = google_service_account.hpa_floor[0].member
}

locals {
  # The only principals that may call the functions. Keys are fixed strings
  # so that for_each is known before the service accounts exist.
  invokers = merge(
    { scheduler = google_service_account.scheduler.member },
    { for member in var.invoker_members : member => member },
  )
}

# A 2nd-gen function is served by a Cloud Run service of the same name;
# run.invoker on that service is what admits a caller.
resource "google_cloud_run_service_iam_member" "invoker" {
  for_each = local.invokers

  project  = var.project_id
  location = google_cloudfunctions2_function.compactor.location
  service  = google_cloudfunctions2_function.compactor.name
  role     = "roles/run.invoker"
  member   = each.value
}

resource "google_cloud_run_service_iam_member" "hpa_floor_invoker" {
  for_each = var.hpa_floor_enabled ? local.invokers : {}

  project  = var.project_id
  location = google_cloudfunctions2_function.hpa_floor[0].location
  service  = google_cloudfunctions2_function.hpa_floor[0].name
  role     = "roles/run.invoker"
  member   = each.value
}
