resource "google_firestore_database" "config" {
  count = local.use_firestore && var.create_firestore_database ? 1 : 0

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

# The function reads the field "config" as JSON text, the same text it would
# find in COMPACTOR_CONFIG.
resource "google_firestore_document" "config" {
  count = local.use_firestore ? 1 : 0

  project     = var.project_id
  database    = var.create_firestore_database ? google_firestore_database.config[0].name : var.firestore_database
  collection  = local.firestore_collection
  document_id = local.firestore_document_id
  fields = jsonencode({
    config = { stringValue = local.config_json }
  })

  depends_on = [google_project_service.apis]
}
