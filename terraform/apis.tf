locals {
  apis = toset(concat(
    [
      "artifactregistry.googleapis.com",
      "cloudbuild.googleapis.com",
      "cloudfunctions.googleapis.com",
      "cloudresourcemanager.googleapis.com",
      "cloudscheduler.googleapis.com",
      "container.googleapis.com",
      "iam.googleapis.com",
      "logging.googleapis.com",
      "monitoring.googleapis.com",
      "run.googleapis.com",
      "storage.googleapis.com",
    ],
    local.any_firestore || var.create_firestore_database ? ["firestore.googleapis.com"] : [],
  ))
}

resource "google_project_service" "apis" {
  for_each = var.enable_apis ? local.apis : toset([])

  project = var.project_id
  service = each.value

  # Other workloads in the project (the cluster itself) use these APIs:
  # removing node-compactor must not switch them off.
  disable_on_destroy         = false
  disable_dependent_services = false
}
