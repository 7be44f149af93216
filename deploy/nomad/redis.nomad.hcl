# The fleet's job state: one Redis server on the node tagged `tranche_role = "redis"`,
# its append-only file on a host volume, no eviction (an evicted key would lose jobs
# silently: Tranche needs `maxmemory-policy noeviction`; at maxmemory writes fail loudly
# instead and the engine retries).
#
#   nomad var put nomad/jobs/tranche-redis redis_password=…
#   nomad job run deploy/nomad/redis.nomad.hcl
#
# The node's client config declares the volume and the role:
#   client {
#     meta        { tranche_role = "redis" }
#     host_volume "tranche-redis" { path = "/var/lib/tranche-redis" read_only = false }
#   }
# Workers reach it as var.broker in the role jobs (a DNS name or the node's private
# address, port 6379); it is also registered as the Nomad service `tranche-redis`.

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

variable "redis_image" {
  type    = string
  default = "redis:7.2.5"
}

variable "maxmemory" {
  type        = string
  description = "Redis maxmemory; keep it under the node's RAM minus the AOF rewrite's copy-on-write headroom."
  default     = "6gb"
}

job "tranche-redis" {
  type        = "service"
  datacenters = var.datacenters

  constraint {
    attribute = "${meta.tranche_role}"
    value     = "redis"
  }

  group "redis" {
    count = 1

    volume "data" {
      type      = "host"
      source    = "tranche-redis"
      read_only = false
    }

    network {
      port "redis" {
        static = 6379
      }
    }

    service {
      name     = "tranche-redis"
      provider = "nomad"
      port     = "redis"

      check {
        type     = "tcp"
        interval = "10s"
        timeout  = "2s"
      }
    }

    restart {
      attempts = 10
      interval = "10m"
      delay    = "5s"
      mode     = "delay"
    }

    task "redis" {
      driver = "docker"

      config {
        image   = var.redis_image
        command = "redis-server"
        args    = ["${NOMAD_SECRETS_DIR}/redis.conf"]
        ports   = ["redis"]
      }

      volume_mount {
        volume      = "data"
        destination = "/data"
      }

      # SIGTERM makes Redis fsync the AOF and exit; give it time on a large dataset.
      kill_signal  = "SIGTERM"
      kill_timeout = "60s"

      template {
        destination = "${NOMAD_SECRETS_DIR}/redis.conf"
        perms       = "0400"
        change_mode = "restart"
        data        = <<-EOT
          bind 0.0.0.0
          port 6379
          protected-mode yes
          dir /data
          # Durability: every write in the append-only file, fsynced each second.
          appendonly yes
          appendfsync everysec
          save ""
          maxmemory ${var.maxmemory}
          maxmemory-policy noeviction
          {{- with nomadVar "nomad/jobs/tranche-redis" }}
          requirepass {{ .redis_password }}
          {{- end }}
        EOT
      }

      resources {
        cpu        = 2000
        memory     = 8192
        memory_max = 10240
      }
    }
  }
}
