resource "google_service_account" "function" {
  project      = var.project_id
  account_id   = var.name
  display_name = "node-compactor function"
  description  = "Identity of the node-compactor function: reads the cluster, cordons and drains one node at a time."

  depends_on = [google_project_service.apis]
}

resource "google_service_account" "scheduler" {
  project      = var.project_id
  account_id   = "${var.name}-scheduler"
  display_name = "node-compactor scheduler"
  description  = "Identity Cloud Scheduler uses to call the node-compactor function; may only invoke it."

  depends_on = [google_project_service.apis]
}

resource "google_service_account" "build" {
  project      = var.project_id
  account_id   = "${var.name}-build"
  display_name = "node-compactor build"
  description  = "Identity Cloud Build uses to build the node-compactor function image."

  depends_on = [google_project_service.apis]
}

locals {
  # compactor/permissions.py is the one source of these lists;
  # tests/terraform checks that they match it exactly.
  iam_permissions = [
    "container.clusters.get",
    "container.clusters.connect",
    "container.nodes.get",
    "container.nodes.list",
    "container.nodes.update",
    "container.pods.get",
    "container.pods.list",
    "container.pods.evict",
    "container.podDisruptionBudgets.get",
    "container.podDisruptionBudgets.list",
    "container.events.create",
    "container.leases.get",
    "container.leases.create",
    "container.leases.update",
  ]
  firestore_iam_permissions = [
    "datastore.entities.get",
  ]

  # In rbac mode Kubernetes RBAC grants the cluster access, so IAM only adds
  # what RBAC cannot: reading the Firestore configuration.
  function_permissions = concat(
    var.access_mode == "iam" ? local.iam_permissions : [],
    local.use_firestore ? local.firestore_iam_permissions : [],
  )
}

resource "google_project_iam_custom_role" "function" {
  count = length(local.function_permissions) > 0 ? 1 : 0

  project     = var.project_id
  role_id     = replace(var.name, "-", "_")
  title       = "node-compactor"
  description = "Exactly what the node-compactor function does: read nodes, pods and PDBs, cordon, evict, write events and its lease."
  permissions = local.function_permissions

  depends_on = [google_project_service.apis]
}

resource "google_project_iam_member" "function" {
  count = length(google_project_iam_custom_role.function)

  project = var.project_id
  role    = google_project_iam_custom_role.function[0].name
  member  = google_service_account.function.member
}

resource "google_project_iam_member" "function_cluster_viewer" {
  count = var.access_mode == "rbac" ? 1 : 0

  project = var.project_id
  # Enough to fetch the cluster's endpoint and connect; what the function may
  # do inside the cluster comes from deploy/rbac.yaml.
  role   = "roles/container.clusterViewer"
  member = google_service_account.function.member
}

# The build reads the source from the copy the Cloud Functions service keeps
# in its own bucket, which this module does not manage, hence project scope.
resource "google_project_iam_member" "build" {
  for_each = toset([
    "roles/logging.logWriter",
    "roles/storage.objectViewer",
  ])

  project = var.project_id
  role    = each.value
  member  = google_service_account.build.member
}

resource "google_artifact_registry_repository_iam_member" "build" {
  project    = var.project_id
  location   = google_artifact_registry_repository.images.location
  repository = google_artifact_registry_repository.images.name
  role       = "roles/artifactregistry.writer"
  member     = google_service_account.build.member
}

locals {
  # The only principals that may call the function. Keys are fixed strings so
  # that for_each is known before the service accounts exist.
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
