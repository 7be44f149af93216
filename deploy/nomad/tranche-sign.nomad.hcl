# Tranche sign role: one worker per client node tagged for it, serving the `sign` queue
# (password encryption and the PAdES signature; the signing key lives only on these nodes).
#
#   nomad var put nomad/jobs/tranche-sign \
#       redis_password=… aws_access_key_id=… aws_secret_access_key=… \
#       sign_p12_base64="$(base64 -w0 signer.p12)" sign_p12_password=… owner_password=…
#   nomad job run -var image=registry.internal/tranche:0.1.0 deploy/nomad/tranche-sign.nomad.hcl
#
# Client nodes opt in with `meta { tranche_role = "sign" }`. The PKCS#12 key, its
# password and the PDFs' owner password are rendered into the task's secrets directory
# (tmpfs, readable by the task only) and passed as files, never as arguments.

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

job "tranche-sign" {
  type        = "system"
  datacenters = var.datacenters

  constraint {
    attribute = "${meta.tranche_role}"
    value     = "sign"
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
          "--queues", "sign",
          "--concurrency", "${attr.cpu.numcores}",
          # The signing identity, as for `tranche notes run --sign-p12`.
          "--sign-p12", "${NOMAD_SECRETS_DIR}/signer.p12",
        ]
      }

      kill_signal  = "SIGTERM"
      kill_timeout = "45s"

      env {
        TRANCHE_REDIS_PASSWORD_FILE    = "${NOMAD_SECRETS_DIR}/redis-password"
        TRANCHE_SIGN_P12_PASSWORD_FILE = "${NOMAD_SECRETS_DIR}/sign-p12-password"
        TRANCHE_OWNER_PASSWORD_FILE    = "${NOMAD_SECRETS_DIR}/owner-password"
        AWS_REGION                     = var.aws_region
        TRANCHE_LOG                    = "info"
      }

      template {
        destination = "${NOMAD_SECRETS_DIR}/redis-password"
        perms       = "0400"
        change_mode = "restart"
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/tranche-sign" }}{{ .redis_password }}{{ end -}}
        EOT
      }

      template {
        destination = "${NOMAD_SECRETS_DIR}/signer.p12"
        perms       = "0400"
        change_mode = "restart"
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/tranche-sign" }}{{ .sign_p12_base64 | base64Decode }}{{ end -}}
        EOT
      }

      template {
        destination = "${NOMAD_SECRETS_DIR}/sign-p12-password"
        perms       = "0400"
        change_mode = "restart"
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/tranche-sign" }}{{ .sign_p12_password }}{{ end -}}
        EOT
      }

      # The PDFs' owner password must be the same on every sign node (without it each
      # process would pick its own random one).
      template {
        destination = "${NOMAD_SECRETS_DIR}/owner-password"
        perms       = "0400"
        change_mode = "restart"
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/tranche-sign" }}{{ .owner_password }}{{ end -}}
        EOT
      }

      template {
        destination = "${NOMAD_SECRETS_DIR}/aws.env"
        perms       = "0400"
        env         = true
        change_mode = "restart"
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/tranche-sign" }}
          AWS_ACCESS_KEY_ID={{ .aws_access_key_id }}
          AWS_SECRET_ACCESS_KEY={{ .aws_secret_access_key }}
          {{- end }}
        EOT
      }

      resources {
        cpu        = 2000
        memory     = 1024
        memory_max = 2048
      }
    }
  }
}
