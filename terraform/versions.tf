terraform {
  # 1.9: variable validations may refer to other variables (the run budget
  # must stay below the function timeout).
  required_version = ">= 1.9"

  required_providers {
    google = {
      source = "hashicorp/google"
      # 7.21 is the first release that sets Direct VPC egress on 2nd-gen functions.
      version = ">= 7.21, < 8"
    }
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.4, < 3"
    }
    # time_sleep: IAM grants and new log-based metrics take a while to be
    # usable, and waiting is the only cure (see iam.tf and monitoring.tf).
    time = {
      source  = "hashicorp/time"
      version = ">= 0.9, < 1"
    }
  }
}
