variable "project_id" {
  description = "Project node-compactor is deployed into (functions, scheduler jobs, accounts, custom roles, metrics, dashboards), and of every cluster that does not name another."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a project ID (6-30 lowercase letters, digits or hyphens), not a project number or name."
  }
}

variable "region" {
  description = "Region of the functions, their scheduler jobs, the source bucket and the image repository, e.g. europe-west1."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Cloud region such as europe-west1 (not a zone)."
  }
}

variable "clusters" {
  description = <<-EOT
    The GKE clusters to compact, by a short key of your choice. Each value
    takes `cluster` and `config` (node-compactor's configuration, camelCase
    keys). `cluster` is {name, location} in project_id, {name, location,
    project} in any project, or the path
    "projects/PROJECT/locations/LOCATION/clusters/NAME"; in a project other
    than project_id, the functions' accounts are granted their roles in that
    project. Each value also takes, optionally, any input of
    modules/node-compactor for that cluster alone: `dry_run`, `schedule`,
    `time_zone`, `scheduler_paused`, `name` (default "nc-KEY"),
    `config_source`, `firestore_document`, `run_budget_seconds`,
    `function_timeout_seconds`, `function_memory`, `function_cpu`,
    `lease_namespace`, `endpoint_mode`, `vpc_connector`,
    `vpc_connector_egress_settings`, `direct_vpc_egress`, `access_mode`,
    `invoker_members`, `ingress_settings`, `dashboard_enabled`,
    `alert_on_failed_runs`, `notification_channels`, `surge_single_replicas`,
    `flow_control_enabled`, `placeholder_namespace`, `node_replacement` and
    the `hpa_floor_*` inputs. One cluster is a map with one entry.
  EOT
  # `any`, not map(object(...)): each cluster's config has its own pools, so
  # the values cannot share one type, and an object type would silently drop
  # a misspelt key. The validations below check the shape instead.
  type = any

  validation {
    condition     = can(keys(var.clusters)) && try(length(var.clusters) > 0, false)
    error_message = "clusters must map at least one key to a cluster's settings."
  }

  validation {
    condition     = alltrue([for key in try(keys(var.clusters), []) : can(regex("^[a-z]([a-z0-9-]*[a-z0-9])?$", key))])
    error_message = "Each key of clusters must be lowercase letters, digits or hyphens, starting with a letter: it becomes part of resource names."
  }

  validation {
    # The default name "nc-KEY" is a service account ID: 6-20 characters
    # here, so that "-scheduler" still fits in 30.
    condition     = alltrue([for key, settings in try(var.clusters, {}) : try(settings.name, null) != null || (length(key) >= 3 && length(key) <= 17)])
    error_message = "A cluster without a name needs a key of 3-17 characters: its deployment is named nc-KEY, which must be 6-20 characters. Shorten the key or set name."
  }

  validation {
    condition = alltrue([
      for settings in try(values(var.clusters), []) : (can(tostring(settings.cluster)) || (can(settings.cluster.name) && can(settings.cluster.location))) && can(keys(settings.config.nodePools))
    ])
    error_message = "Each cluster needs cluster = { name, location } (or \"projects/P/locations/L/clusters/C\") and config = { nodePools = { ... } }."
  }

  validation {
    # A cluster given by its path; main.tf reads the same pattern
    # (local.cluster_path_pattern) to split it. The message repeats the check
    # to name each entry it refuses (a validation cannot read a local).
    condition = alltrue([
      for settings in try(values(var.clusters), []) : !can(tostring(settings.cluster)) || can(regex(
        "^projects/(?P<project>[a-z][a-z0-9-]{4,28}[a-z0-9])/locations/(?P<location>[a-z]+-[a-z]+[0-9]+(?:-[a-z])?)/clusters/(?P<name>[a-z](?:[a-z0-9-]*[a-z0-9])?)$",
        settings.cluster,
      ))
    ])
    error_message = "A cluster given as a path must be projects/PROJECT_ID/locations/LOCATION/clusters/NAME, with a project ID (6-30 lowercase letters, digits or hyphens), a region or zone and a GKE cluster name; not: ${join(", ", [for key in try(keys(var.clusters), []) : format("%s = %q", key, try(tostring(var.clusters[key].cluster), "")) if !can(regex("^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/locations/[a-z]+-[a-z]+[0-9]+(?:-[a-z])?/clusters/[a-z](?:[a-z0-9-]*[a-z0-9])?$", try(tostring(var.clusters[key].cluster), "projects/a12345/locations/a-a1/clusters/a")))])}."
  }

  validation {
    condition = alltrue([
      for settings in try(values(var.clusters), []) : try(settings.cluster.project, null) == null || can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", settings.cluster.project))
    ])
    error_message = "cluster.project must be a project ID (6-30 lowercase letters, digits or hyphens), not a project number or name; not: ${join(", ", [for key in try(keys(var.clusters), []) : format("%s = %q", key, try(tostring(var.clusters[key].cluster.project), "")) if !can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", try(var.clusters[key].cluster.project == null ? "a12345" : tostring(var.clusters[key].cluster.project), "a12345")))])}."
  }

  validation {
    condition = alltrue([
      for settings in try(values(var.clusters), []) : length(setsubtract(try(keys(settings), []), [
        "cluster", "config", "name", "dry_run", "config_source", "firestore_document", "schedule", "time_zone",
        "scheduler_paused", "run_budget_seconds", "function_timeout_seconds", "function_memory", "function_cpu",
        "lease_namespace", "endpoint_mode", "vpc_connector", "vpc_connector_egress_settings", "direct_vpc_egress",
        "access_mode", "invoker_members", "ingress_settings", "dashboard_enabled", "alert_on_failed_runs",
        "notification_channels", "surge_single_replicas", "flow_control_enabled", "placeholder_namespace", "node_replacement",
        "hpa_floor_enabled", "hpa_floor_schedule", "hpa_floor_dry_run",
        "hpa_floor_run_budget_seconds", "hpa_floor_timeout_seconds", "hpa_floor_minimum_replicas_lower_bound",
        "hpa_floor_prometheus_server_url", "hpa_floor_prometheus_url_allowlist",
      ])) == 0
    ])
    error_message = "A cluster's settings hold a key modules/node-compactor does not take (a typo must not silently drop a setting); see the description of clusters."
  }
}

variable "name" {
  description = "Prefix of what the clusters share: the build service account (NAME-build), the custom roles (NAME with _ for -), the source bucket, the image repository and the log-based metrics (NAME/...)."
  type        = string
  default     = "node-compactor"

  validation {
    # Service account IDs are at most 30 characters and get "-build" appended.
    condition     = can(regex("^[a-z][a-z0-9-]{4,22}[a-z0-9]$", var.name))
    error_message = "name must be 6-24 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "runtime" {
  description = "Python runtime of the functions."
  type        = string
  default     = "python311"

  validation {
    condition     = contains(["python311", "python312"], var.runtime)
    error_message = "runtime must be python311 or python312."
  }
}

variable "firestore_database" {
  description = "Firestore database of the configuration documents of clusters whose config_source is \"firestore\"."
  type        = string
  default     = "(default)"

  validation {
    condition     = var.firestore_database == "(default)" || can(regex("^[a-z][a-z0-9-]{2,61}[a-z0-9]$", var.firestore_database))
    error_message = "firestore_database must be \"(default)\" or a database ID (4-63 lowercase letters, digits or hyphens)."
  }
}

variable "create_firestore_database" {
  description = "Create the Firestore database named by firestore_database (Native mode). Leave false when it already exists."
  type        = bool
  default     = false
}

variable "firestore_location" {
  description = "Location of the Firestore database created when create_firestore_database is true (a region, or a multi-region such as eur3 or nam5). Null means region."
  type        = string
  default     = null
}

variable "enable_apis" {
  description = "Enable the Google APIs node-compactor needs. Set false where another team manages the project's APIs. APIs are never disabled on destroy."
  type        = bool
  default     = true
}

variable "source_bucket_name" {
  description = "Name of the bucket for the functions' source archive. Null means PROJECT_ID-NAME-source."
  type        = string
  default     = null
}

variable "iam_propagation_wait" {
  description = "How long to wait after granting the build account its roles before the first build (IAM is eventually consistent). A duration such as 120s."
  type        = string
  default     = "120s"

  validation {
    condition     = can(regex("^[0-9]+[smh]$", var.iam_propagation_wait))
    error_message = "iam_propagation_wait must be a duration such as 120s or 2m."
  }
}

variable "log_metric_propagation_wait" {
  description = "How long to wait after creating the log-based metrics before creating an alert policy on them (Cloud Monitoring may take up to 10 minutes to know a new metric). Only used when some cluster sets alert_on_failed_runs."
  type        = string
  default     = "600s"

  validation {
    condition     = can(regex("^[0-9]+[smh]$", var.log_metric_propagation_wait))
    error_message = "log_metric_propagation_wait must be a duration such as 600s or 10m."
  }
}

variable "labels" {
  description = "Labels added to every resource that takes labels."
  type        = map(string)
  default     = {}
}
