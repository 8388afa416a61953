terraform {
  # 1.9: variable validations may refer to other variables (the run budget
  # must stay below the function timeout).
  required_version = ">= 1.9"

  # No provider block: the caller configures google (project, region, labels)
  # and hands it down; this module can then be called with for_each.
  required_providers {
    google = {
      source = "hashicorp/google"
      # 7.21 is the first release that sets Direct VPC egress on 2nd-gen functions.
      version = ">= 7.21, < 8"
    }
  }
}
