# PostgreSQL 15 with the wal2json output plugin, for docker/compose.yaml.
FROM postgres:15-bookworm
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      postgresql-15-wal2json \
    && rm -rf /var/lib/apt/lists/*
