# The night's control task: enqueue the run (no work in this process), then wait for it
# to finish and tear the worker fleet down once, from the run-done hook.
#
#   nomad var put nomad/jobs/tranche-control redis_password=… aws_access_key_id=… aws_secret_access_key=…
#   nomad acl policy apply -namespace default -job tranche-control \
#       tranche-control-teardown deploy/nomad/control-teardown.policy.hcl
#   nomad job run deploy/nomad/control.nomad.hcl      # registers the parameterized job
#   nomad job dispatch -meta date=2026-11-20 tranche-control
#
# Inputs: a host volume `tranche-inputs` on the control node holding broker.toml and,
# per trade date, DATE/trades.csv and DATE/clients.csv (e.g. the back office's drop folder).
# `tranche notes run` is idempotent: dispatching the same date again resumes the run.

variable "image" {
  type    = string
  default = "tranche:latest"
}

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

variable "broker" {
  type    = string
  default = "redis://tranche-redis.internal:6379/0"
}

variable "store" {
  type    = string
  default = "s3://tranche-artifacts/notes"
}

variable "aws_region" {
  type    = string
  default = "ap-south-1"
}

variable "worker_jobs" {
  type        = list(string)
  description = "Nomad jobs stopped by the run-done hook."
  default     = ["tranche-render", "tranche-sign", "tranche-mail"]
}

job "tranche-control" {
  type        = "batch"
  datacenters = var.datacenters

  parameterized {
    payload       = "forbidden"
    meta_required = ["date"]
  }

  constraint {
    attribute = "${meta.tranche_role}"
    value     = "control"
  }

  group "night" {
    volume "inputs" {
      type      = "host"
      source    = "tranche-inputs"
      read_only = true
    }

    restart {
      attempts = 3
      interval = "1h"
      delay    = "30s"
      mode     = "fail"
    }

    task "control" {
      driver = "docker"

      config {
        image   = var.image
        command = "/bin/sh"
        args = [
          "-ec",
          <<-EOT
            date="$NOMAD_META_date"
            tranche notes run --broker '${var.broker}' --store '${var.store}' --no-work \
              --trades "/inputs/$date/trades.csv" --clients "/inputs/$date/clients.csv" \
              --broker-file /inputs/broker.toml --date "$date" --out "$NOMAD_ALLOC_DIR/out"
            exec tranche --broker '${var.broker}' wait "contract-notes/$date" \
              --on-done "sh $NOMAD_TASK_DIR/teardown.sh"
          EOT
        ]
      }

      volume_mount {
        volume      = "inputs"
        destination = "/inputs"
        read_only   = true
      }

      # A Nomad token for this task (workload identity) and the task API socket
      # ($NOMAD_SECRETS_DIR/api.sock): the teardown hook stops the worker jobs with it,
      # allowed by control-teardown.policy.hcl.
      identity {
        env = true
      }

      kill_signal  = "SIGTERM"
      kill_timeout = "45s"

      env {
        TRANCHE_REDIS_PASSWORD_FILE = "${NOMAD_SECRETS_DIR}/redis-password"
        AWS_REGION                  = var.aws_region
      }

      template {
        destination = "${NOMAD_SECRETS_DIR}/redis-password"
        perms       = "0400"
        change_mode = "noop"
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/tranche-control" }}{{ .redis_password }}{{ end -}}
        EOT
      }

      template {
        destination = "${NOMAD_SECRETS_DIR}/aws.env"
        perms       = "0400"
        env         = true
        change_mode = "noop"
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/tranche-control" }}
          AWS_ACCESS_KEY_ID={{ .aws_access_key_id }}
          AWS_SECRET_ACCESS_KEY={{ .aws_secret_access_key }}
          {{- end }}
        EOT
      }

      # Run once by `tranche wait --on-done` (however many waiters), with TRANCHE_RUN,
      # TRANCHE_SUCCEEDED, TRANCHE_FAILED and TRANCHE_CANCELLED set. Failed clients stay
      # in Redis: `tranche retry` them after running the worker jobs again.
      template {
        destination = "local/teardown.sh"
        perms       = "0555"
        change_mode = "noop"
        data        = <<-EOT
          set -u
          echo "$TRANCHE_RUN finished: $TRANCHE_SUCCEEDED succeeded, $TRANCHE_FAILED failed, $TRANCHE_CANCELLED cancelled"
          for job in ${join(" ", var.worker_jobs)}; do
            curl -fsS --unix-socket "$NOMAD_SECRETS_DIR/api.sock" \
              -H "Authorization: Bearer $NOMAD_TOKEN" \
              -X DELETE "http://localhost/v1/job/$job" && echo "stopped $job"
          done
        EOT
      }

      resources {
        cpu    = 500
        memory = 1024
      }
    }
  }
}
