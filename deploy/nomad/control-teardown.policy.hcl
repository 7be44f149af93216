# ACL policy for the tranche-control job's workload identity: enough to stop the worker
# jobs from the run-done hook, nothing else.
#
#   nomad acl policy apply -namespace default -job tranche-control \
#       tranche-control-teardown deploy/nomad/control-teardown.policy.hcl

namespace "default" {
  capabilities = ["read-job", "submit-job"]
}
