# --- the build: one account for every function's build ---------------------

resource "google_service_account" "build" {
  project      = var.project_id
  account_id   = "${var.name}-build"
  display_name = "node-compactor build"
  description  = "Identity Cloud Build uses to build the node-compactor function images."

  depends_on = [google_project_service.apis]
}

# What a 2nd-gen build reads and writes, no more. Source followed: Cloud Run,
# "Set build service account (source deploy)"
# (https://cloud.google.com/run/docs/configuring/services/build-service-account)
# grants roles/run.builder, whose storage permission is storage.objects.get
# alone (https://cloud.google.com/run/docs/reference/iam/roles); an older
# revision of that page named roles/storage.objectAdmin, which adds object
# create, update and delete the build never uses. roles/storage.objectViewer
# (objects.get and objects.list) covers the read; the image push is granted on
# the one repository below, and roles/run.builder's project-wide Artifact
# Registry rights are not needed.
#
# The build reads the source from the copy the Cloud Functions service keeps
# in its own bucket (gcf-v2-sources-PROJECT_NUMBER-REGION), which this module
# does not manage, hence project scope.
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

# IAM is eventually consistent: a grant is usually effective within two
# minutes and can take several (https://cloud.google.com/iam/docs/access-change-propagation).
# A build started right after the grants can fail with permission denied, and
# waiting is the only cure. The functions read the build account through this
# resource's triggers, so no build starts before the wait is over; new grants
# (a changed set of roles) replace it and wait again.
resource "time_sleep" "build_iam" {
  create_duration = var.iam_propagation_wait

  triggers = {
    service_account = google_service_account.build.id
    project_roles   = join(",", sort([for grant in google_project_iam_member.build : grant.id]))
    repository_role = google_artifact_registry_repository_iam_member.build.id
  }
}

# --- what the functions may do: custom roles, one set per project ----------

locals {
  # compactor/permissions.py is the one source of these lists;
  # tests/terraform checks that they match it exactly.
  iam_permissions = [
    "container.clusters.get",
    "container.clusters.connect",
    "container.nodes.get",
    "container.nodes.list",
    "container.nodes.watch",
    "container.nodes.update",
    "container.pods.get",
    "container.pods.list",
    "container.pods.watch",
    "container.pods.update",
    "container.pods.evict",
    "container.podDisruptionBudgets.list",
    "container.podDisruptionBudgets.watch",
    "container.thirdPartyObjects.list",
    "container.events.create",
    "container.leases.get",
    "container.leases.create",
    "container.leases.update",
  ]
  surge_iam_permissions = [
    "container.deployments.get",
    "container.deployments.list",
    "container.deployments.update",
    "container.replicaSets.list",
    "container.persistentVolumeClaims.list",
  ]
  firestore_iam_permissions = [
    "datastore.entities.get",
  ]
  hpa_floor_iam_permissions = [
    "container.clusters.get",
    "container.clusters.connect",
    "container.horizontalPodAutoscalers.list",
    "container.horizontalPodAutoscalers.update",
    "container.replicaSets.list",
    "container.events.create",
    "container.leases.get",
    "container.leases.create",
    "container.leases.update",
  ]
  prometheus_iam_permissions = [
    "monitoring.timeSeries.list",
  ]

  # Each role exists only while some cluster needs it (local.custom_roles_needed,
  # in main.tf); the module grants to each cluster's accounts the ones its
  # settings call for.
  custom_role_definitions = {
    cluster = {
      title       = "node-compactor"
      description = "Exactly what the node-compactor function does: read nodes, pods and PDBs, cordon, evict, annotate pods for scale-down steering, write events and its lease."
      permissions = local.iam_permissions
    }
    surge = {
      title       = "node-compactor rolling restarts"
      description = "What node-compactor adds for pools with surgeSingleReplicas: list Deployments, ReplicaSets and PVCs, restart a Deployment (patch its pod template's restartedAt)."
      permissions = local.surge_iam_permissions
    }
    firestore = {
      title       = "node-compactor configuration reader"
      description = "Read the node-compactor configuration document in Firestore."
      permissions = local.firestore_iam_permissions
    }
    hpa_floor = {
      title       = "node-compactor HPA floor"
      description = "Exactly what the node-compactor HPA floor job does: list and patch HPAs, list ReplicaSets, write events and its lease."
      permissions = local.hpa_floor_iam_permissions
    }
    prometheus = {
      title       = "node-compactor Prometheus reader"
      description = "Query Google Cloud Managed Service for Prometheus (instant queries of the HPA floor job)."
      permissions = local.prometheus_iam_permissions
    }
  }
  custom_role_id = {
    for key in keys(local.custom_role_definitions) : key => key == "cluster" ? replace(var.name, "-", "_") : "${replace(var.name, "-", "_")}_${key}"
  }
}

# The roles in project_id, for its clusters (and Firestore's for every cluster).
resource "google_project_iam_custom_role" "shared" {
  for_each = {
    for key, role in local.custom_role_definitions : key => role if contains(keys(local.custom_roles_needed), "${var.project_id}/${key}")
  }

  project     = var.project_id
  role_id     = local.custom_role_id[each.key]
  title       = each.value.title
  description = each.value.description
  permissions = each.value.permissions

  depends_on = [google_project_service.apis]
}

# The same roles, with the same IDs, in each other project that holds a
# cluster, for its clusters alone. node-compactor enables no API there: a
# project with GKE clusters has what they need.
resource "google_project_iam_custom_role" "cluster_project" {
  for_each = {
    for id, grant in local.custom_roles_needed : id => grant if grant.project != var.project_id
  }

  project     = each.value.project
  role_id     = local.custom_role_id[each.value.role]
  title       = local.custom_role_definitions[each.value.role].title
  description = local.custom_role_definitions[each.value.role].description
  permissions = local.custom_role_definitions[each.value.role].permissions
}

locals {
  # The roles of project_id, by what they allow; null where none is needed.
  custom_roles = {
    for key in keys(local.custom_role_definitions) : key => try(google_project_iam_custom_role.shared[key].name, null)
  }
  # What each project's clusters are granted: the roles of that project,
  # and Firestore's of project_id.
  custom_roles_by_project = {
    for project in local.cluster_projects : project => {
      for key in keys(local.custom_role_definitions) : key => (
        key == "firestore" || project == var.project_id ? local.custom_roles[key] : try(google_project_iam_custom_role.cluster_project["${project}/${key}"].name, null)
      )
    }
  }
}
