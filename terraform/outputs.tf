locals {
  deployments = {
    for key, deployment in module.cluster : key => {
      function_url                    = deployment.function_url
      function_name                   = deployment.function_name
      function_service_account_email  = deployment.function_service_account_email
      scheduler_service_account_email = deployment.scheduler_service_account_email
      scheduler_job                   = deployment.scheduler_job
      dry_run_command                 = deployment.dry_run_command
      dashboard_id                    = deployment.dashboard_id
      dashboard_url                   = deployment.dashboard_url
      hpa_floor_function_url          = deployment.hpa_floor_function_url
      hpa_floor_service_account_email = deployment.hpa_floor_service_account_email
      hpa_floor_dry_run_command       = deployment.hpa_floor_dry_run_command
      lease_namespace                 = deployment.lease_namespace
      surge_single_replicas           = deployment.surge_single_replicas
      flow_control_enabled            = deployment.flow_control_enabled
      placeholder_namespace           = deployment.placeholder_namespace
      node_replacement                = deployment.node_replacement
    }
  }

  rbac_template           = file("${path.module}/../deploy/rbac.yaml")
  hpa_floor_rbac_path     = "${path.module}/../deploy/rbac-hpa-floor.yaml"
  hpa_floor_rbac_template = fileexists(local.hpa_floor_rbac_path) ? file(local.hpa_floor_rbac_path) : null
  surge_rbac_template     = file("${path.module}/../deploy/rbac-surge.yaml")
  flow_control_template   = file("${path.module}/../deploy/flowcontrol.yaml")
  rbac_placeholder        = "FUNCTION_SERVICE_ACCOUNT_EMAIL"
  # The manifests' Lease Role and RoleBinding sit in the default Lease namespace;
  # each cluster's own lease_namespace replaces it.
  rbac_lease_namespace = "namespace: kube-system"
  # deploy/replacement.yaml names the default placeholder namespace three times: the Namespace's own
  # name and the namespace of its Role and RoleBinding, each a whole line indented two spaces (never a
  # label such as app.kubernetes.io/name, nor node-compactor-placeholder). Each cluster's
  # placeholder_namespace replaces them.
  replacement_template          = file("${path.module}/../deploy/replacement.yaml")
  placeholder_namespace_pattern = "/(?m)^  (name|namespace): node-compactor$/"
}

output "deployments" {
  description = "Per cluster key: function URL and name, service accounts, scheduler job, the manual dry-run command, dashboard, and the same for the HPA floor job (null when it is off)."
  value       = local.deployments
}

output "dashboard_urls" {
  description = "Per cluster key, where to open its dashboard in the Cloud console (null when its dashboard_enabled is false)."
  value       = { for key, deployment in local.deployments : key => deployment.dashboard_url }
}

output "dry_run_command" {
  description = "With a single cluster, the command that calls its function once in dry-run mode as yourself (you need the invoker role: see invoker_members); with several, null (see dry_run_commands)."
  value       = length(local.deployments) == 1 ? one(values(local.deployments)).dry_run_command : null
}

output "dry_run_commands" {
  description = "Per cluster key, the command that calls its function once in dry-run mode as yourself."
  value       = { for key, deployment in local.deployments : key => deployment.dry_run_command }
}

output "config_json" {
  description = "Per cluster key, the configuration its function reads, as JSON."
  value       = { for key, deployment in module.cluster : key => deployment.config_json }
}

output "build_service_account_email" {
  description = "Identity Cloud Build uses to build every function."
  value       = google_service_account.build.email
}

output "custom_role_ids" {
  description = "The shared custom IAM roles of project_id by what they allow (cluster, surge, firestore, hpa_floor, prometheus); null where no cluster needs one."
  value       = local.custom_roles
}

output "custom_role_ids_by_project" {
  description = "Per project that holds a cluster, the custom IAM roles its clusters' accounts are granted, by what they allow: that project's own (the same role IDs), and the Firestore role of project_id; null where none of its clusters needs one."
  value       = local.custom_roles_by_project
}

output "rbac_manifests" {
  description = "Per cluster key whose access_mode is \"rbac\": deploy/rbac.yaml with its function's service account and Lease namespace filled in. Apply it with kubectl to that cluster."
  value = {
    for key, deployment in local.deployments : key => replace(
      replace(local.rbac_template, local.rbac_placeholder, deployment.function_service_account_email),
      local.rbac_lease_namespace, "namespace: ${deployment.lease_namespace}",
    )
    if try(local.clusters[key].access_mode, null) == "rbac"
  }
}

output "surge_rbac_manifests" {
  description = "Per cluster key whose access_mode is \"rbac\" and that grants surgeSingleReplicas' permissions (surge_single_replicas, or a pool of its config): deploy/rbac-surge.yaml with its function's service account filled in. Apply it with kubectl beside rbac_manifests."
  value = {
    for key, deployment in local.deployments : key => replace(local.surge_rbac_template, local.rbac_placeholder, deployment.function_service_account_email)
    if try(local.clusters[key].access_mode, null) == "rbac" && deployment.surge_single_replicas
  }
}

output "replacement_manifests" {
  description = "Per cluster key that uses node replacement (an enabled pool of its config enables it, or node_replacement), in either access_mode: deploy/replacement.yaml with its function's service account and placeholder namespace filled in, the namespace, the PriorityClass node-compactor-placeholder and the Role that lets the function create and delete pods in that namespace only. Apply it with kubectl to that cluster."
  value = {
    for key, deployment in local.deployments : key => replace(
      replace(local.replacement_template, local.rbac_placeholder, deployment.function_service_account_email),
      local.placeholder_namespace_pattern, "  $1: ${deployment.placeholder_namespace}",
    )
    if deployment.node_replacement
  }
}

output "flow_control_manifests" {
  description = "Per cluster key whose flow_control_enabled is true (in either access_mode): deploy/flowcontrol.yaml with its function's service account filled in, an API Priority and Fairness FlowSchema and PriorityLevelConfiguration for that identity. Apply it with kubectl to that cluster."
  value = {
    for key, deployment in local.deployments : key => replace(local.flow_control_template, local.rbac_placeholder, deployment.function_service_account_email)
    if deployment.flow_control_enabled
  }
}

output "hpa_floor_rbac_manifests" {
  description = "Per cluster key whose access_mode is \"rbac\" and whose HPA floor job is on: deploy/rbac-hpa-floor.yaml with the HPA floor account (its placeholder HPA_FLOOR_SERVICE_ACCOUNT_EMAIL or FUNCTION_SERVICE_ACCOUNT_EMAIL) and the Lease namespace filled in; empty while the file does not exist at plan time."
  value = local.hpa_floor_rbac_template == null ? {} : {
    for key, deployment in local.deployments : key => replace(
      replace(
        replace(local.hpa_floor_rbac_template, "HPA_FLOOR_SERVICE_ACCOUNT_EMAIL", deployment.hpa_floor_service_account_email),
        local.rbac_placeholder, deployment.hpa_floor_service_account_email,
      ),
      local.rbac_lease_namespace, "namespace: ${deployment.lease_namespace}",
    )
    if try(local.clusters[key].access_mode, null) == "rbac" && try(local.clusters[key].hpa_floor_enabled, null) == true
  }
}

output "source_object" {
  description = "The source archive every function was built from (its name carries the archive's MD5)."
  value       = "gs://${google_storage_bucket.source.name}/${google_storage_bucket_object.source.name}"
}
