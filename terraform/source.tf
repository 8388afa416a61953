locals {
  repository_root = "${path.module}/.."

  # Caches and hidden files never reach the archive: they differ from machine
  # to machine and would change its hash without changing the code.
  source_excluded_pattern = "(^|/)(__pycache__|\\.[^/]+)(/|$)|\\.py[cod]$"

  # Only what the functions import and install: main.py, the compactor
  # package and requirements.txt. Tests, docs and virtualenvs stay out. One
  # archive serves every cluster and both entry points.
  source_files = concat(
    ["main.py", "requirements.txt"],
    sort([
      for source_file in fileset(local.repository_root, "compactor/**") : source_file
      if length(regexall(local.source_excluded_pattern, source_file)) == 0
    ]),
  )
}

data "archive_file" "source" {
  type        = "zip"
  output_path = "${path.module}/build/${var.name}-source.zip"

  # Entries written from content carry no timestamps, so the same code always
  # gives the same archive and the same hash. file() reads text, which is all
  # the package holds.
  dynamic "source" {
    for_each = local.source_files
    content {
      filename = source.value
      content  = file("${local.repository_root}/${source.value}")
    }
  }
}

resource "google_storage_bucket" "source" {
  #checkov:skip=CKV_GCP_62:The bucket only holds build inputs written by this module; Cloud Audit Logs record access to it, and a second bucket for usage logs would need its own retention and access rules.
  project  = var.project_id
  name     = coalesce(var.source_bucket_name, "${var.project_id}-${var.name}-source")
  location = var.region

  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"

  # Everything in it is rebuilt from the repository on the next apply.
  force_destroy = true

  versioning {
    enabled = true
  }

  lifecycle_rule {
    condition {
      days_since_noncurrent_time = 30
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.apis]
}

resource "google_storage_bucket_object" "source" {
  # The archive's hash in the object name makes every code change a new
  # build source, and so a new deployment; unchanged code redeploys nothing.
  name   = "${var.name}-${data.archive_file.source.output_md5}.zip"
  bucket = google_storage_bucket.source.name
  source = data.archive_file.source.output_path
}

resource "google_artifact_registry_repository" "images" {
  #checkov:skip=CKV_GCP_84:The images hold only this open-source repository's code and public packages, no data; Google-managed encryption applies, and a customer key would add a KMS key ring to run for nothing secret.
  project       = var.project_id
  location      = var.region
  repository_id = "${var.name}-images"
  format        = "DOCKER"
  description   = "Images Cloud Build makes of the node-compactor functions."

  cleanup_policies {
    id     = "keep-recent"
    action = "KEEP"
    most_recent_versions {
      # Counted per package, i.e. per function.
      keep_count = 5
    }
  }

  cleanup_policies {
    id     = "delete-old"
    action = "DELETE"
    condition {
      tag_state  = "ANY"
      older_than = "2592000s"
    }
  }

  depends_on = [google_project_service.apis]
}
