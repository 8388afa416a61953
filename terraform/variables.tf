variable "project_id" {
  description = "Project that holds the GKE cluster; node-compactor is deployed into it too."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a project ID (6-30 lowercase letters, digits or hyphens), not a project number or name."
  }
}

variable "region" {
  description = "Region of the function, its scheduler job, its source bucket and image repository, e.g. europe-west1."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Cloud region such as europe-west1 (not a zone)."
  }
}

variable "cluster" {
  description = "The GKE cluster to compact, in project_id: its name and location (the region of a regional cluster, the zone of a zonal one)."
  type = object({
    name     = string
    location = string
  })

  validation {
    condition     = can(regex("^[a-z]([a-z0-9-]*[a-z0-9])?$", var.cluster.name)) && can(regex("^[a-z]+-[a-z]+[0-9]+(-[a-z])?$", var.cluster.location))
    error_message = "cluster.name must be a GKE cluster name and cluster.location a region (europe-west1) or zone (europe-west1-b)."
  }
}

variable "name" {
  description = "Name of the function, its scheduler job and Cloud Run service, and prefix of the service accounts, bucket, repository and metrics this module creates."
  type        = string
  default     = "node-compactor"

  validation {
    # Service account IDs are at most 30 characters and get "-scheduler" appended.
    condition     = can(regex("^[a-z][a-z0-9-]{4,18}[a-z0-9]$", var.name))
    error_message = "name must be 6-20 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "config" {
  description = "node-compactor configuration with its camelCase keys (docs/deploy.md, \"Configuration\"): nodePools (pool name => settings) and optionally poolLabel, skipNodesWithLocalStorage, skipNodesWithSystemPods. Attributes set to null are left out; the function rejects unknown keys. Use the dry_run variable rather than dryRun."
  type        = any

  validation {
    condition     = can(keys(var.config.nodePools)) && try(length(var.config.nodePools) > 0, false) && alltrue([for settings in try(values(var.config.nodePools), []) : can(keys(settings))])
    error_message = "config.nodePools must map at least one node pool name to an object of settings."
  }

  validation {
    condition     = !can(var.config.dryRun)
    error_message = "Set the dry_run variable instead of config.dryRun, so that there is one switch."
  }
}

variable "dry_run" {
  description = "When true, every run reports what it would do and writes nothing to the cluster (sets dryRun in the function's configuration). Start with true, read the reports, then set false."
  type        = bool
  default     = false
}

variable "config_source" {
  description = "Where the function reads its configuration: \"env\" (the COMPACTOR_CONFIG environment variable; a change redeploys the function) or \"firestore\" (a Firestore document this module writes; a change needs no redeploy)."
  type        = string
  default     = "env"

  validation {
    condition     = contains(["env", "firestore"], var.config_source)
    error_message = "config_source must be \"env\" or \"firestore\"."
  }
}

variable "firestore_document" {
  description = "Firestore document holding the configuration when config_source is \"firestore\", as collection/document."
  type        = string
  default     = "node-compactor/config"

  validation {
    condition     = can(regex("^[^/]+/[^/]+$", var.firestore_document))
    error_message = "firestore_document must be collection/document (exactly one slash)."
  }
}

variable "firestore_database" {
  description = "Firestore database of the configuration document when config_source is \"firestore\"."
  type        = string
  default     = "(default)"

  validation {
    condition     = var.firestore_database == "(default)" || can(regex("^[a-z][a-z0-9-]{2,61}[a-z0-9]$", var.firestore_database))
    error_message = "firestore_database must be \"(default)\" or a database ID (4-63 lowercase letters, digits or hyphens)."
  }
}

variable "create_firestore_database" {
  description = "Create the Firestore database named by firestore_database (Native mode). Leave false when it already exists; only used when config_source is \"firestore\"."
  type        = bool
  default     = false
}

variable "firestore_location" {
  description = "Location of the Firestore database created when create_firestore_database is true (a region, or a multi-region such as eur3 or nam5). Null means region."
  type        = string
  default     = null
}

variable "schedule" {
  description = "When Cloud Scheduler runs the compactor, in cron syntax. Each run continues or starts at most one drain."
  type        = string
  default     = "*/5 * * * *"

  validation {
    condition     = length(split(" ", trimspace(var.schedule))) == 5
    error_message = "schedule must be a cron expression with five fields, e.g. \"*/5 * * * *\"."
  }
}

variable "time_zone" {
  description = "Time zone of the schedule, from the tz database (e.g. Etc/UTC, Europe/Berlin)."
  type        = string
  default     = "Etc/UTC"
}

variable "scheduler_paused" {
  description = "Create the scheduler job paused: the function can still be called by hand."
  type        = bool
  default     = false
}

variable "run_budget_seconds" {
  description = "Time one run may spend before it stops evicting and reports (COMPACTOR_RUN_BUDGET_SECONDS). Must be below function_timeout_seconds."
  type        = number
  default     = 240

  validation {
    condition     = var.run_budget_seconds >= 30 && var.run_budget_seconds < var.function_timeout_seconds
    error_message = "run_budget_seconds must be at least 30 and less than function_timeout_seconds, so a run ends before the platform kills it."
  }
}

variable "function_timeout_seconds" {
  description = "Request timeout of the function. Must exceed run_budget_seconds; the scheduler's attempt deadline is this plus 30 seconds."
  type        = number
  default     = 300

  validation {
    # Cloud Scheduler's attempt deadline for HTTP targets is at most 1800 s.
    condition     = var.function_timeout_seconds >= 60 && var.function_timeout_seconds <= 1770 && floor(var.function_timeout_seconds) == var.function_timeout_seconds
    error_message = "function_timeout_seconds must be a whole number of seconds between 60 and 1770."
  }
}

variable "function_memory" {
  description = "Memory of the function instance, e.g. 512Mi or 1Gi. Large clusters (thousands of pods) need more."
  type        = string
  default     = "512Mi"

  validation {
    condition     = can(regex("^[0-9]+(Mi|Gi|M|G)$", var.function_memory))
    error_message = "function_memory must be a quantity such as 512Mi or 1Gi."
  }
}

variable "function_cpu" {
  description = "vCPUs of the function instance (\"1\" needs at least 128Mi of memory)."
  type        = string
  default     = "1"

  validation {
    condition     = can(regex("^(0\\.[0-9]+|[1-8])$", var.function_cpu))
    error_message = "function_cpu must be a fraction below 1 (e.g. 0.5) or a whole number from 1 to 8."
  }
}

variable "runtime" {
  description = "Python runtime of the function."
  type        = string
  default     = "python311"

  validation {
    condition     = contains(["python311", "python312"], var.runtime)
    error_message = "runtime must be python311 or python312."
  }
}

variable "lease_namespace" {
  description = "Namespace of the node-compactor Lease that keeps two runs from acting at once (COMPACTOR_LEASE_NAMESPACE)."
  type        = string
  default     = "kube-system"

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", var.lease_namespace))
    error_message = "lease_namespace must be a Kubernetes namespace name."
  }
}

variable "endpoint_mode" {
  description = "How the function reaches the control plane (COMPACTOR_ENDPOINT_MODE): \"dns\" uses the cluster's DNS-based endpoint, which works for private clusters without any VPC access; \"ip\" uses the endpoint IP, which for a private cluster needs vpc_connector or direct_vpc_egress."
  type        = string
  default     = "dns"

  validation {
    condition     = contains(["dns", "ip"], var.endpoint_mode)
    error_message = "endpoint_mode must be \"dns\" or \"ip\"."
  }
}

variable "vpc_connector" {
  description = "Serverless VPC Access connector for endpoint_mode \"ip\" on a private cluster, as projects/P/locations/R/connectors/NAME. Null: none."
  type        = string
  default     = null

  validation {
    condition     = var.vpc_connector == null ? true : can(regex("^projects/[^/]+/locations/[^/]+/connectors/[^/]+$", var.vpc_connector))
    error_message = "vpc_connector must be projects/P/locations/R/connectors/NAME."
  }
}

variable "vpc_connector_egress_settings" {
  description = "Which traffic goes through vpc_connector: PRIVATE_RANGES_ONLY (enough to reach a private control plane) or ALL_TRAFFIC."
  type        = string
  default     = "PRIVATE_RANGES_ONLY"

  validation {
    condition     = contains(["PRIVATE_RANGES_ONLY", "ALL_TRAFFIC"], var.vpc_connector_egress_settings)
    error_message = "vpc_connector_egress_settings must be PRIVATE_RANGES_ONLY or ALL_TRAFFIC."
  }
}

variable "direct_vpc_egress" {
  description = "Direct VPC egress (no connector) for endpoint_mode \"ip\" on a private cluster: network and subnetwork (names or self links), optional network tags, and egress (VPC_EGRESS_PRIVATE_RANGES_ONLY or VPC_EGRESS_ALL_TRAFFIC). Null: none."
  type = object({
    network    = string
    subnetwork = string
    tags       = optional(list(string), [])
    egress     = optional(string, "VPC_EGRESS_PRIVATE_RANGES_ONLY")
  })
  default = null

  validation {
    condition     = var.direct_vpc_egress == null ? true : contains(["VPC_EGRESS_PRIVATE_RANGES_ONLY", "VPC_EGRESS_ALL_TRAFFIC"], var.direct_vpc_egress.egress)
    error_message = "direct_vpc_egress.egress must be VPC_EGRESS_PRIVATE_RANGES_ONLY or VPC_EGRESS_ALL_TRAFFIC."
  }

  validation {
    condition     = var.direct_vpc_egress == null || var.vpc_connector == null
    error_message = "Set vpc_connector or direct_vpc_egress, not both: a function has one way into the VPC."
  }
}

variable "access_mode" {
  description = "How the function is allowed into the cluster: \"iam\" grants a custom IAM role with exactly the permissions it uses, on the project (so on every cluster in it); \"rbac\" grants only roles/container.clusterViewer in IAM and expects deploy/rbac.yaml (see the rbac_manifest output) applied to this one cluster."
  type        = string
  default     = "iam"

  validation {
    condition     = contains(["iam", "rbac"], var.access_mode)
    error_message = "access_mode must be \"iam\" or \"rbac\"."
  }
}

variable "invoker_members" {
  description = "Extra principals allowed to call the function by hand (e.g. for a dry run), as user:EMAIL, group:EMAIL or serviceAccount:EMAIL. The scheduler's own service account is always allowed."
  type        = list(string)
  default     = []

  validation {
    # No allUsers, allAuthenticatedUsers or domain:, ever: a run drains nodes.
    condition     = alltrue([for member in var.invoker_members : can(regex("^(user|group|serviceAccount):[^@\\s]+@[^@\\s]+\\.[^@\\s]+$", member))])
    error_message = "Each invoker member must be user:EMAIL, group:EMAIL or serviceAccount:EMAIL; public and domain-wide access is not allowed."
  }
}

variable "ingress_settings" {
  description = "Which networks may reach the function (callers always need an identity token with the invoker role): ALLOW_ALL lets people call it by hand from anywhere; ALLOW_INTERNAL_ONLY admits Cloud Scheduler and callers inside the project's VPC networks only."
  type        = string
  default     = "ALLOW_ALL"

  validation {
    condition     = contains(["ALLOW_ALL", "ALLOW_INTERNAL_ONLY"], var.ingress_settings)
    error_message = "ingress_settings must be ALLOW_ALL or ALLOW_INTERNAL_ONLY."
  }
}

variable "enable_apis" {
  description = "Enable the Google APIs node-compactor needs. Set false where another team manages the project's APIs. APIs are never disabled on destroy."
  type        = bool
  default     = true
}

variable "source_bucket_name" {
  description = "Name of the bucket for the function's source archives. Null means PROJECT_ID-NAME-source."
  type        = string
  default     = null
}

variable "alert_on_failed_runs" {
  description = "Create a Cloud Monitoring alert policy that fires when a run fails."
  type        = bool
  default     = false
}

variable "notification_channels" {
  description = "Notification channels of the failed-run alert, as projects/P/notificationChannels/ID."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for channel in var.notification_channels : can(regex("^projects/[^/]+/notificationChannels/[^/]+$", channel))])
    error_message = "Each notification channel must be projects/P/notificationChannels/ID."
  }
}

variable "labels" {
  description = "Labels added to every resource that takes labels."
  type        = map(string)
  default     = {}
}
