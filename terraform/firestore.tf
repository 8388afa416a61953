locals {
  firestore_database = var.create_firestore_database ? google_firestore_database.config[0].name : var.firestore_database
}

# One database for every cluster's configuration document (each cluster
# writes its own document, node-compactor/NAME by default).
resource "google_firestore_database" "config" {
  count = var.create_firestore_database ? 1 : 0

  project     = var.project_id
  name        = var.firestore_database
  location_id = coalesce(var.firestore_location, var.region)
  type        = "FIRESTORE_NATIVE"

  # The database may come to hold other data; removing node-compactor must
  # not take it away.
  deletion_policy         = "ABANDON"
  delete_protection_state = "DELETE_PROTECTION_ENABLED"

  depends_on = [google_project_service.apis]
}
