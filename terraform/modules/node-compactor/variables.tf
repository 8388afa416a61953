# --- what the caller shares between clusters ---------------------------------
# The root module in terraform/ creates these once per project; see README.md.

variable "project_id" {
  description = "Project the function, its scheduler job, service accounts, dashboard and alert are deployed into; also the cluster's project unless cluster.project names another."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a project ID (6-30 lowercase letters, digits or hyphens), not a project number or name."
  }
}

variable "region" {
  description = "Region of the function and its scheduler job, e.g. europe-west1."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Cloud region such as europe-west1 (not a zone)."
  }
}

variable "source_archive" {
  description = "The function's source archive in Cloud Storage (bucket and object), shared by every cluster and by both entry points."
  type = object({
    bucket = string
    object = string
  })
}

variable "docker_repository" {
  description = "Artifact Registry repository the build pushes the function images to, as projects/P/locations/L/repositories/R."
  type        = string
}

variable "build_service_account" {
  description = "Service account Cloud Build runs the function's build as, as projects/P/serviceAccounts/EMAIL. Its roles must have propagated before the first build: the root module passes it through a time_sleep."
  type        = string
}

variable "custom_roles" {
  description = "Project custom roles shared by the clusters, by what they allow (null where no cluster needs one); cluster, surge, hpa_floor and prometheus must be roles of the cluster's project (they are granted there), firestore one of project_id: cluster (IAM_PERMISSIONS), surge (SURGE_IAM_PERMISSIONS), firestore (FIRESTORE_IAM_PERMISSIONS), hpa_floor (HPA_FLOOR_IAM_PERMISSIONS), prometheus (PROMETHEUS_IAM_PERMISSIONS), each from compactor/permissions.py."
  type = object({
    cluster    = optional(string)
    surge      = optional(string)
    firestore  = optional(string)
    hpa_floor  = optional(string)
    prometheus = optional(string)
  })
}

variable "log_metric_types" {
  description = "Metric types of the shared log-based metrics (runs, drains-started, drains-completed, rollbacks, failed-runs, nodes-awaiting-removal, cluster-price-per-hour, savings-per-hour), each labelled by cluster with the function's name. The root module passes them through a time_sleep so that an alert is created only once Cloud Monitoring knows them."
  type        = map(string)

  validation {
    condition     = length(setsubtract(["runs", "drains-started", "drains-completed", "rollbacks", "failed-runs", "nodes-awaiting-removal", "cluster-price-per-hour", "savings-per-hour"], keys(var.log_metric_types))) == 0
    error_message = "log_metric_types must name runs, drains-started, drains-completed, rollbacks, failed-runs, nodes-awaiting-removal, cluster-price-per-hour and savings-per-hour."
  }
}

variable "firestore_database" {
  description = "Firestore database of the configuration document when config_source is \"firestore\" (it must exist; the root module can create it)."
  type        = string
  default     = "(default)"
  nullable    = false

  validation {
    condition     = var.firestore_database == "(default)" || can(regex("^[a-z][a-z0-9-]{2,61}[a-z0-9]$", var.firestore_database))
    error_message = "firestore_database must be \"(default)\" or a database ID (4-63 lowercase letters, digits or hyphens)."
  }
}

# --- this cluster ------------------------------------------------------------

variable "cluster" {
  description = "The GKE cluster to compact: its name, its location (the region of a regional cluster, the zone of a zonal one) and its project (null means project_id). In another project, the functions' accounts are granted there, and custom_roles must be roles of that project."
  type = object({
    name     = string
    location = string
    project  = optional(string)
  })

  validation {
    condition     = can(regex("^[a-z]([a-z0-9-]*[a-z0-9])?$", var.cluster.name)) && can(regex("^[a-z]+-[a-z]+[0-9]+(-[a-z])?$", var.cluster.location))
    error_message = "cluster.name must be a GKE cluster name and cluster.location a region (europe-west1) or zone (europe-west1-b)."
  }

  validation {
    condition     = var.cluster.project == null || can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.cluster.project))
    error_message = "cluster.project must be a project ID (6-30 lowercase letters, digits or hyphens), not a project number or name; null means project_id."
  }
}

variable "name" {
  description = "Name of this cluster's function, its scheduler job and Cloud Run service (the `cluster` label of the log-based metrics), and prefix of its service accounts (NAME, NAME-scheduler, NAME-hpa)."
  type        = string

  validation {
    # Service account IDs are at most 30 characters and get "-scheduler" appended.
    condition     = can(regex("^[a-z][a-z0-9-]{4,18}[a-z0-9]$", var.name))
    error_message = "name must be 6-20 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "config" {
  description = "node-compactor configuration with its camelCase keys (docs/deploy.md, \"Configuration\"): nodePools (pool name => settings) and optionally poolLabel, skipNodesWithLocalStorage, skipNodesWithSystemPods. Attributes set to null are left out; the function rejects unknown keys. Use dry_run rather than dryRun."
  type        = any

  validation {
    condition     = can(keys(var.config.nodePools)) && try(length(var.config.nodePools) > 0, false) && alltrue([for settings in try(values(var.config.nodePools), []) : can(keys(settings))])
    error_message = "config.nodePools must map at least one node pool name to an object of settings."
  }

  validation {
    condition     = !can(var.config.dryRun)
    error_message = "Set dry_run instead of config.dryRun, so that there is one switch."
  }
}

variable "dry_run" {
  description = "When true, every run reports what it would do and writes nothing to the cluster (sets dryRun in the function's configuration). Start with true, read the reports, then set false."
  type        = bool
  default     = false
  nullable    = false
}

variable "config_source" {
  description = "Where the function reads its configuration: \"env\" (the COMPACTOR_CONFIG environment variable; a change redeploys the function) or \"firestore\" (a Firestore document this module writes; a change needs no redeploy)."
  type        = string
  default     = "env"
  nullable    = false

  validation {
    condition     = contains(["env", "firestore"], var.config_source)
    error_message = "config_source must be \"env\" or \"firestore\"."
  }
}

variable "firestore_document" {
  description = "Firestore document holding the configuration when config_source is \"firestore\", as collection/document. Null means node-compactor/NAME, one document per cluster."
  type        = string
  default     = null

  validation {
    condition     = var.firestore_document == null || can(regex("^[^/]+/[^/]+$", var.firestore_document))
    error_message = "firestore_document must be collection/document (exactly one slash)."
  }
}

variable "schedule" {
  description = "When Cloud Scheduler runs the compactor, in cron syntax. Each run continues or starts at most one drain."
  type        = string
  default     = "*/5 * * * *"
  nullable    = false

  validation {
    condition     = length(split(" ", trimspace(var.schedule))) == 5
    error_message = "schedule must be a cron expression with five fields, e.g. \"*/5 * * * *\"."
  }
}

variable "time_zone" {
  description = "Time zone of the schedules, from the tz database (e.g. Etc/UTC, Europe/Berlin)."
  type        = string
  default     = "Etc/UTC"
  nullable    = false
}

variable "scheduler_paused" {
  description = "Create the scheduler jobs paused: the functions can still be called by hand."
  type        = bool
  default     = false
  nullable    = false
}

variable "run_budget_seconds" {
  description = "Time one run may spend before it stops evicting and reports (COMPACTOR_RUN_BUDGET_SECONDS). Must be below function_timeout_seconds."
  type        = number
  default     = 240
  nullable    = false

  validation {
    condition     = var.run_budget_seconds >= 30 && var.run_budget_seconds < var.function_timeout_seconds
    error_message = "run_budget_seconds must be at least 30 and less than function_timeout_seconds, so a run ends before the platform kills it."
  }
}

variable "function_timeout_seconds" {
  description = "Request timeout of the function. Must exceed run_budget_seconds; the scheduler's attempt deadline is this plus 30 seconds."
  type        = number
  default     = 300
  nullable    = false

  validation {
    # Cloud Scheduler's attempt deadline for HTTP targets is at most 1800 s.
    condition     = var.function_timeout_seconds >= 60 && var.function_timeout_seconds <= 1770 && floor(var.function_timeout_seconds) == var.function_timeout_seconds
    error_message = "function_timeout_seconds must be a whole number of seconds between 60 and 1770."
  }
}

variable "function_memory" {
  description = "Memory of the function instance. 1Gi holds a run up to 10,000 nodes / 300,000 pods (a dry run peaks at about 430 MiB there); 512Mi suffices up to about 2,500 nodes, 2Gi up to 20,000 (docs/benchmarks.md)."
  type        = string
  default     = "1Gi"
  nullable    = false

  validation {
    condition     = can(regex("^[0-9]+(Mi|Gi|M|G)$", var.function_memory))
    error_message = "function_memory must be a quantity such as 512Mi or 1Gi."
  }
}

variable "function_cpu" {
  description = "vCPUs of the function instance (\"1\" needs at least 128Mi of memory)."
  type        = string
  default     = "1"
  nullable    = false

  validation {
    condition     = can(regex("^(0\\.[0-9]+|[1-8])$", var.function_cpu))
    error_message = "function_cpu must be a fraction below 1 (e.g. 0.5) or a whole number from 1 to 8."
  }
}

variable "runtime" {
  description = "Python runtime of the functions."
  type        = string
  default     = "python311"
  nullable    = false

  validation {
    condition     = contains(["python311", "python312"], var.runtime)
    error_message = "runtime must be python311 or python312."
  }
}

variable "lease_namespace" {
  description = "Namespace of the Leases that keep two runs from acting at once (COMPACTOR_LEASE_NAMESPACE)."
  type        = string
  default     = "kube-system"
  nullable    = false

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", var.lease_namespace))
    error_message = "lease_namespace must be a Kubernetes namespace name."
  }
}

variable "placeholder_namespace" {
  description = "Namespace of node replacement's placeholder pods (the configuration's placeholderNamespace, which Terraform writes from this): where the root's replacement_manifests create the namespace and the Role that lets the function create and delete pods. It must hold nothing else: whoever may create pods in a namespace may run them as any of its ServiceAccounts."
  type        = string
  default     = "node-compactor"
  nullable    = false

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", var.placeholder_namespace))
    error_message = "placeholder_namespace must be a Kubernetes namespace name."
  }

  validation {
    # Pods created there could run as the ServiceAccounts of the system's own controllers.
    condition     = !contains(["default", "kube-system", "kube-public", "kube-node-lease"], var.placeholder_namespace) && !startswith(var.placeholder_namespace, "kube-") && !startswith(var.placeholder_namespace, "gke-")
    error_message = "placeholder_namespace must be a namespace of its own, not default, kube-* or gke-*: the function may create pods in it."
  }

  validation {
    condition     = try(var.config.placeholderNamespace, null) == null || try(var.config.placeholderNamespace, null) == var.placeholder_namespace
    error_message = "config.placeholderNamespace differs from placeholder_namespace: set placeholder_namespace alone, which Terraform writes into the configuration and the manifests."
  }
}

variable "node_replacement" {
  description = "Print deploy/replacement.yaml (the placeholder namespace, the PriorityClass node-compactor-placeholder and the Role that lets the function create and delete pods in that namespace only) filled in for this cluster, in the root's replacement_manifests, in either access_mode. Null (the default): when an enabled pool of config enables replacement; set it true when the configuration lives in a Firestore document Terraform does not write."
  type        = bool
  default     = null
}

variable "endpoint_mode" {
  description = "How the function reaches the control plane (COMPACTOR_ENDPOINT_MODE): \"dns\" uses the DNS-based endpoint, reachable with IAM alone and no VPC access; \"ip\" uses cluster.endpoint, which is the PUBLIC address whenever the cluster has one (authorized networks must then admit the function, which has no fixed egress address); \"private-ip\" uses the control plane's private address and needs vpc_connector or direct_vpc_egress. docs/deploy.md has the matrix."
  type        = string
  default     = "dns"
  nullable    = false

  validation {
    condition     = contains(["dns", "ip", "private-ip"], var.endpoint_mode)
    error_message = "endpoint_mode must be \"dns\", \"ip\" or \"private-ip\"."
  }
}

variable "vpc_connector" {
  description = "Serverless VPC Access connector for endpoint_mode \"private-ip\", as projects/P/locations/R/connectors/NAME. Null: none."
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
  nullable    = false

  validation {
    condition     = contains(["PRIVATE_RANGES_ONLY", "ALL_TRAFFIC"], var.vpc_connector_egress_settings)
    error_message = "vpc_connector_egress_settings must be PRIVATE_RANGES_ONLY or ALL_TRAFFIC."
  }
}

variable "direct_vpc_egress" {
  description = "Direct VPC egress (no connector) for endpoint_mode \"private-ip\": network and subnetwork (names or self links), optional network tags, and egress (VPC_EGRESS_PRIVATE_RANGES_ONLY or VPC_EGRESS_ALL_TRAFFIC). Null: none."
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

  validation {
    # Without a way into the VPC the private address cannot be reached at all.
    condition     = var.endpoint_mode != "private-ip" || var.direct_vpc_egress != null || var.vpc_connector != null
    error_message = "endpoint_mode \"private-ip\" needs vpc_connector or direct_vpc_egress: the private control plane address is reachable only from the VPC."
  }
}

variable "access_mode" {
  description = "How the functions are allowed into the cluster: \"iam\" grants the shared custom roles on the project (so on every cluster in it); \"rbac\" grants only roles/container.clusterViewer in IAM and expects deploy/rbac.yaml (and deploy/rbac-hpa-floor.yaml with the HPA floor) applied to this one cluster."
  type        = string
  default     = "iam"
  nullable    = false

  validation {
    condition     = contains(["iam", "rbac"], var.access_mode)
    error_message = "access_mode must be \"iam\" or \"rbac\"."
  }
}

variable "invoker_members" {
  description = "Extra principals allowed to call the functions by hand (e.g. for a dry run), as user:EMAIL, group:EMAIL or serviceAccount:EMAIL. The scheduler's own service account is always allowed."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    # No allUsers, allAuthenticatedUsers or domain:, ever: a run drains nodes.
    condition     = alltrue([for member in var.invoker_members : can(regex("^(user|group|serviceAccount):[^@\\s]+@[^@\\s]+\\.[^@\\s]+$", member))])
    error_message = "Each invoker member must be user:EMAIL, group:EMAIL or serviceAccount:EMAIL; public and domain-wide access is not allowed."
  }
}

variable "ingress_settings" {
  description = "Which networks may reach the functions (callers always need an identity token with the invoker role): ALLOW_ALL lets people call them by hand from anywhere; ALLOW_INTERNAL_ONLY admits Cloud Scheduler and callers inside the project's VPC networks only."
  type        = string
  default     = "ALLOW_ALL"
  nullable    = false

  validation {
    condition     = contains(["ALLOW_ALL", "ALLOW_INTERNAL_ONLY"], var.ingress_settings)
    error_message = "ingress_settings must be ALLOW_ALL or ALLOW_INTERNAL_ONLY."
  }
}

# --- monitoring --------------------------------------------------------------

variable "dashboard_enabled" {
  description = "Create a Cloud Monitoring dashboard for this cluster (output dashboard_url): runs, drains started and completed, rollbacks, failed runs, nodes awaiting removal, the cluster's price per hour and the savings per hour of each action."
  type        = bool
  default     = true
  nullable    = false
}

variable "alert_on_failed_runs" {
  description = "Create a Cloud Monitoring alert policy that fires when a run on this cluster fails."
  type        = bool
  default     = false
  nullable    = false
}

variable "notification_channels" {
  description = "Notification channels of the failed-run alert, as projects/P/notificationChannels/ID."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for channel in var.notification_channels : can(regex("^projects/[^/]+/notificationChannels/[^/]+$", channel))])
    error_message = "Each notification channel must be projects/P/notificationChannels/ID."
  }
}

variable "surge_single_replicas" {
  description = "Grant what a pool with surgeSingleReplicas needs (SURGE_IAM_PERMISSIONS in iam mode; deploy/rbac-surge.yaml in rbac mode, see the root's surge_rbac_manifests): list Deployments, ReplicaSets and PersistentVolumeClaims, get and patch Deployments. Null (the default): when an enabled pool of config sets surgeSingleReplicas; set it true when the configuration lives in a Firestore document Terraform does not write."
  type        = bool
  default     = null
}

variable "flow_control_enabled" {
  description = "Print deploy/flowcontrol.yaml (an API Priority and Fairness FlowSchema and PriorityLevelConfiguration for the function's identity) with the function's service account filled in, in the root's flow_control_manifests. Turn it on when the API server throttles the function's reads (HTTP 429 in its log, read.throttled in its report) or to keep its full read of every node and pod out of the global-default priority level the cluster's other clients share; otherwise leave it off."
  type        = bool
  default     = false
  nullable    = false
}

# --- the HPA floor job (main.hpa_floor) ----------------------------------------

variable "hpa_floor_enabled" {
  description = "Deploy the HPA floor job for this cluster: a second function (entry point hpa_floor) from the same source archive, with its own service account and scheduler job."
  type        = bool
  default     = false
  nullable    = false
}

variable "hpa_floor_schedule" {
  description = "When Cloud Scheduler runs the HPA floor job, in cron syntax (every minute by default: an HPA collapses fast)."
  type        = string
  default     = "* * * * *"
  nullable    = false

  validation {
    condition     = length(split(" ", trimspace(var.hpa_floor_schedule))) == 5
    error_message = "hpa_floor_schedule must be a cron expression with five fields, e.g. \"* * * * *\"."
  }
}

variable "hpa_floor_dry_run" {
  description = "When true, the scheduler calls the HPA floor job with dryRun=true: it reports the minReplicas it would set and writes nothing. The job also reads the cluster's configuration, so dry_run = true holds it in dry run as well; this switch keeps the HPA job alone in dry run while the compactor acts."
  type        = bool
  default     = false
  nullable    = false
}

variable "hpa_floor_run_budget_seconds" {
  description = "Time one HPA floor run may spend (its COMPACTOR_RUN_BUDGET_SECONDS). Must be below hpa_floor_timeout_seconds."
  type        = number
  default     = 40
  nullable    = false

  validation {
    condition     = var.hpa_floor_run_budget_seconds >= 30 && var.hpa_floor_run_budget_seconds < var.hpa_floor_timeout_seconds
    error_message = "hpa_floor_run_budget_seconds must be at least 30 and less than hpa_floor_timeout_seconds."
  }
}

variable "hpa_floor_timeout_seconds" {
  description = "Request timeout of the HPA floor function; its scheduler's attempt deadline is this plus 30 seconds."
  type        = number
  default     = 60
  nullable    = false

  validation {
    condition     = var.hpa_floor_timeout_seconds >= 60 && var.hpa_floor_timeout_seconds <= 1770 && floor(var.hpa_floor_timeout_seconds) == var.hpa_floor_timeout_seconds
    error_message = "hpa_floor_timeout_seconds must be a whole number of seconds between 60 and 1770."
  }
}

variable "hpa_floor_minimum_replicas_lower_bound" {
  description = "MINIMUM_REPLICAS_LOWER_BOUND (estafette's variable): no HPA the job manages gets a minReplicas below this."
  type        = number
  default     = 3
  nullable    = false

  validation {
    condition     = var.hpa_floor_minimum_replicas_lower_bound >= 0 && floor(var.hpa_floor_minimum_replicas_lower_bound) == var.hpa_floor_minimum_replicas_lower_bound
    error_message = "hpa_floor_minimum_replicas_lower_bound must be a whole number, 0 or more."
  }
}

variable "hpa_floor_prometheus_server_url" {
  description = "PROMETHEUS_SERVER_URL: a Prometheus HTTP API to query instead of Google Cloud Managed Service for Prometheus. Null: Managed Prometheus in project_id, read with the prometheus custom role."
  type        = string
  default     = null

  validation {
    condition     = var.hpa_floor_prometheus_server_url == null || can(regex("^https?://[^/\\s]+", var.hpa_floor_prometheus_server_url))
    error_message = "hpa_floor_prometheus_server_url must be an http(s) URL."
  }
}

variable "hpa_floor_prometheus_url_allowlist" {
  description = "PROMETHEUS_URL_ALLOWLIST: hosts (host or host:port) an HPA's own estafette.io/hpa-scaler-prometheus-server-url may name. Empty: that annotation is never honoured."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for host in var.hpa_floor_prometheus_url_allowlist : can(regex("^[A-Za-z0-9.-]+(:[0-9]+)?$", host))])
    error_message = "Each entry of hpa_floor_prometheus_url_allowlist must be a host or host:port, without scheme or path."
  }
}
