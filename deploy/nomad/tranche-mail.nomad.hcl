# Tranche mail role: one worker per client node tagged for it, serving the `mail`
# queue (SMTP; I/O-bound, so few cores and many jobs in flight).
#
#   nomad var put nomad/jobs/tranche-mail \
#       redis_password=… aws_access_key_id=… aws_secret_access_key=… smtp_password=…
#   nomad job run -var image=registry.internal/tranche:0.1.0 \
#       -var smtp='smtp://notes@relay.internal:587?tls=starttls' deploy/nomad/tranche-mail.nomad.hcl
#
# Client nodes opt in with `meta { tranche_role = "mail" }`. The SMTP URL carries the
# user name at most; the password comes from TRANCHE_SMTP_PASSWORD_FILE.

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

variable "smtp" {
  type        = string
  description = "SMTP server URL, no password (e.g. smtp://user@relay:587?tls=starttls)."
  default     = "smtp://relay.internal:587?tls=starttls"
}

job "tranche-mail" {
  type        = "system"
  datacenters = var.datacenters

  constraint {
    attribute = "${meta.tranche_role}"
    value     = "mail"
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
          "--queues", "mail",
          "--concurrency", "16",
        ]
      }

      kill_signal  = "SIGTERM"
      kill_timeout = "45s"

      env {
        TRANCHE_REDIS_PASSWORD_FILE = "${NOMAD_SECRETS_DIR}/redis-password"
        TRANCHE_SMTP                = var.smtp
        TRANCHE_SMTP_PASSWORD_FILE  = "${NOMAD_SECRETS_DIR}/smtp-password"
        AWS_REGION                  = var.aws_region
        TRANCHE_LOG                 = "info"
      }

      template {
        destination = "${NOMAD_SECRETS_DIR}/redis-password"
        perms       = "0400"
        change_mode = "restart"
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/tranche-mail" }}{{ .redis_password }}{{ end -}}
        EOT
      }

      template {
        destination = "${NOMAD_SECRETS_DIR}/smtp-password"
        perms       = "0400"
        change_mode = "restart"
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/tranche-mail" }}{{ .smtp_password }}{{ end -}}
        EOT
      }

      template {
        destination = "${NOMAD_SECRETS_DIR}/aws.env"
        perms       = "0400"
        env         = true
        change_mode = "restart"
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/tranche-mail" }}
          AWS_ACCESS_KEY_ID={{ .aws_access_key_id }}
          AWS_SECRET_ACCESS_KEY={{ .aws_secret_access_key }}
          {{- end }}
        EOT
      }

      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
