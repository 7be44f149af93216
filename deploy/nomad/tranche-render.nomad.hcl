# Tranche render role: one worker per client node tagged for it, serving the
# `process` and `render` queues of contract notes (CPU-bound: Typst in process).
#
#   nomad var put nomad/jobs/tranche-render \
#       redis_password=… aws_access_key_id=… aws_secret_access_key=…
#   nomad job run -var image=registry.internal/tranche:0.1.0 deploy/nomad/tranche-render.nomad.hcl
#
# Client nodes opt in through their meta (client config: `meta { tranche_role = "render" }`),
# the way a fleet constrains on e.g. meta.ec2_nomad_client. Secrets reach the process
# through Nomad variables rendered by templates into the task's secrets directory, never
# through arguments. The client's `max_kill_timeout` must be at least this job's
# kill_timeout (Nomad's default cap is 30s): see deploy/README.md.

variable "image" {
  type        = string
  description = "Container image with the tranche binary (deploy/Dockerfile)."
  default     = "tranche:latest"
}

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

variable "broker" {
  type        = string
  description = "Redis URL without password (the password comes from TRANCHE_REDIS_PASSWORD_FILE)."
  default     = "redis://tranche-redis.internal:6379/0"
}

variable "store" {
  type        = string
  description = "Artifact store: s3://bucket/prefix."
  default     = "s3://tranche-artifacts/notes"
}

variable "aws_region" {
  type    = string
  default = "ap-south-1"
}

job "tranche-render" {
  type        = "system"
  datacenters = var.datacenters

  constraint {
    attribute = "${meta.tranche_role}"
    value     = "render"
  }

  update {
    max_parallel = 1
    stagger      = "30s"
  }

  group "worker" {
    restart {
      attempts = 5
      interval = "10m"
      delay    = "15s"
      mode     = "delay"
    }

    task "tranche" {
      driver = "docker"

      config {
        image   = var.image
        command = "tranche"
        args = [
          "worker",
          "--broker", var.broker,
          "--store", var.store,
          "--queues", "process,render",
          # One render per core: Typst renders are CPU-bound.
          "--concurrency", "${attr.cpu.numcores}",
        ]
      }

      # SIGTERM starts the worker's graceful shutdown: it stops reserving, lets running
      # jobs finish for its grace period (30 s) and hands the rest back to the queue.
      kill_signal  = "SIGTERM"
      kill_timeout = "45s"

      env {
        TRANCHE_REDIS_PASSWORD_FILE = "${NOMAD_SECRETS_DIR}/redis-password"
        AWS_REGION                  = var.aws_region
        TRANCHE_LOG                 = "info"
      }

      template {
        destination = "${NOMAD_SECRETS_DIR}/redis-password"
        perms       = "0400"
        change_mode = "restart"
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/tranche-render" }}{{ .redis_password }}{{ end -}}
        EOT
      }

      # S3 credentials as environment variables (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY).
      # On EC2, drop this template and give the instance profile access to the bucket.
      template {
        destination = "${NOMAD_SECRETS_DIR}/aws.env"
        perms       = "0400"
        env         = true
        change_mode = "restart"
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/tranche-render" }}
          AWS_ACCESS_KEY_ID={{ .aws_access_key_id }}
          AWS_SECRET_ACCESS_KEY={{ .aws_secret_access_key }}
          {{- end }}
        EOT
      }

      resources {
        cpu        = 4000
        memory     = 2048
        memory_max = 4096
      }
    }
  }
}
