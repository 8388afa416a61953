# The function reads the field "config" as JSON text, the same text it would
# find in COMPACTOR_CONFIG. One document per cluster (node-compactor/NAME by
# default) in a database the caller provides.
resource "google_firestore_document" "config" {
  count = local.use_firestore ? 1 : 0

  project     = var.project_id
  database    = var.firestore_database
  collection  = local.firestore_collection
  document_id = local.firestore_document_id
  fields = jsonencode({
    config = { stringValue = local.config_json }
  })
}
